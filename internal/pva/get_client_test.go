package pva

// The client's side of GET, which pvans never sends: the capture's
// GET exchange is decoded and re-encoded with it (golden_test.go), and
// fuzzed (fuzz_test.go). internal/sim's tests have their own.

// AppendGetRequest appends a GET request message.
func AppendGetRequest(dst []byte, flags uint8, m *GetRequest) []byte {
	w, start := NewRequest(dst, flags, CmdGet, m.SID, m.IOID, m.Subcmd)
	appendPVRequest(&w, m.IsInit(), m.PVRequest)
	return FinishMessage(w.B, start)
}

// Decode decodes a GET reply. An EXEC reply needs typ, the Type from this
// operation's INIT reply; its partial value is applied to m.Value (kept
// from the previous EXEC if it has that type, else a new zero value), so
// fields not in Changed keep their previous values, as a client expects.
func (m *GetReply) Decode(payload []byte, bigEndian bool, tc *TypeCache, typ *FieldDesc) error {
	r := NewReader(payload, bigEndian, "CMD_GET(reply)")
	m.IOID, m.Subcmd = ReadReplyHead(&r)
	m.Status = r.Status("status")
	switch {
	case r.Failed() || !m.Status.OK():
	case m.IsInit():
		m.Type = readInitType(&r, tc)
	default:
		m.Changed, m.Value = ReadChanged(&r, tc, typ, m.Changed, m.Value)
	}
	return r.Err()
}

func appendPVRequest(w *Writer, init bool, v *Value) {
	if init {
		AppendTypeValue(w, v)
	}
}

// readInitType reads the type an INIT reply announces. The null type is
// refused: the operation's values are read with it.
func readInitType(r *Reader, tc *TypeCache) *FieldDesc {
	t := ReadFieldDesc(r, "type", tc)
	if !r.Failed() && t == nil {
		r.Fail("type", "null type")
	}
	return t
}
