package pva

// Status types.
const (
	StatusOK      = 0
	StatusWarning = 1
	StatusError   = 2
	StatusFatal   = 3
)

// Status is a pvData Status. OK with empty message and stack encodes as
// the single byte 0xFF.
type Status struct {
	Type    uint8
	Message string
	Stack   string
}

// OK reports success as clients judge it (OK or WARNING).
func (s Status) OK() bool { return s.Type == StatusOK || s.Type == StatusWarning }

func (s Status) Error() string {
	names := [...]string{"OK", "WARNING", "ERROR", "FATAL"}
	n := "UNKNOWN"
	if int(s.Type) < len(names) {
		n = names[s.Type]
	}
	if s.Message == "" {
		return n
	}
	return n + ": " + s.Message
}

// ReadStatus decodes a Status.
func (r *Reader) Status(field string) Status {
	t := r.U8(field + ".type")
	if r.Failed() || t == 0xFF {
		return Status{}
	}
	if t > StatusFatal {
		r.Fail(field+".type", "unknown status type")
		return Status{}
	}
	return Status{Type: t, Message: r.String(field + ".message"), Stack: r.String(field + ".stack")}
}

// Status appends a Status.
func (w *Writer) Status(s Status) {
	if s.Type == StatusOK && s.Message == "" && s.Stack == "" {
		w.U8(0xFF)
		return
	}
	w.U8(s.Type)
	w.String(s.Message)
	w.String(s.Stack)
}
