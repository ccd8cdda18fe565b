package pva

// Operation sub-commands (the u8 after SID/IOID in GET/PUT/RPC/...).
const (
	SubcmdExec    = 0x00
	SubcmdInit    = 0x08
	SubcmdDestroy = 0x10 // destroy the operation after this reply (pvAccessCPP lastRequest)
	SubcmdGet     = 0x40
)

// Every operation request starts with the channel's SID, the operation's
// IOID and a sub-command; every reply with the IOID and the sub-command.
// The helpers below read and write those heads and the parts several
// operations share, so each message lists only its own layout. They are
// exported for the operations only the simulator serves (internal/sim).

// ReadRequestHead reads an operation request's SID, IOID and sub-command.
func ReadRequestHead(r *Reader) (sid, ioid uint32, subcmd uint8) {
	return r.U32("sid"), r.U32("ioid"), r.U8("subcmd")
}

// NewRequest starts an operation request (see NewMessage) with its head.
func NewRequest(dst []byte, flags uint8, cmd Command, sid, ioid uint32, subcmd uint8) (Writer, int) {
	w, start := NewMessage(dst, flags, cmd)
	w.U32(sid)
	w.U32(ioid)
	w.U8(subcmd)
	return w, start
}

// ReadReplyHead reads an operation reply's IOID and sub-command.
func ReadReplyHead(r *Reader) (ioid uint32, subcmd uint8) { return r.U32("ioid"), r.U8("subcmd") }

// NewReply starts an operation reply (see NewMessage) with its head.
func NewReply(dst []byte, flags uint8, cmd Command, ioid uint32, subcmd uint8) (Writer, int) {
	w, start := NewMessage(dst, flags, cmd)
	w.U32(ioid)
	w.U8(subcmd)
	return w, start
}

// ReadPVRequest reads the pvRequest ("type + full value") an INIT request
// carries; other requests carry none (nil).
func ReadPVRequest(r *Reader, init bool, tc *TypeCache) *Value {
	if r.Failed() || !init {
		return nil
	}
	return ReadTypeValue(r, "pvRequest", tc)
}

// ReadChanged reads a Changed BitSet and the partial value it selects, of
// typ, the type the operation's INIT reply announced. The value is read
// into v when v has that type, so fields not in Changed keep their
// previous values, as a client expects; else into a new zero value. On a
// failure v comes back as it was.
func ReadChanged(r *Reader, tc *TypeCache, typ *FieldDesc, changed BitSet, v *Value) (BitSet, *Value) {
	if typ == nil {
		r.Fail("value", "no type from an INIT reply")
		return changed, v
	}
	changed = ReadBitSet(r, "changed", changed)
	if r.Failed() {
		return changed, v
	}
	if v == nil || v.Type != typ {
		v = NewValue(typ)
	}
	ReadPartialValue(r, "value", v, changed, tc)
	return changed, v
}

// AppendChanged writes a Changed BitSet and the partial value it selects.
func AppendChanged(w *Writer, changed BitSet, v *Value) {
	AppendBitSet(w, changed)
	AppendPartialValue(w, v, changed)
}

// RPCRequest is an RPC (0x14) client message. Subcmd&SubcmdInit: INIT,
// Value is the pvRequest; otherwise EXEC, Value is the argument. Both are
// "type + full value"; nil Value is sent as the null type.
type RPCRequest struct {
	SID    uint32
	IOID   uint32
	Subcmd uint8
	Value  *Value
}

// IsInit reports an INIT request.
func (m *RPCRequest) IsInit() bool { return m.Subcmd&SubcmdInit != 0 }

// Decode decodes an RPC request. tc is the connection's cache for the
// client→server direction (pvAccessCPP clients use 0xFD/0xFE here).
func (m *RPCRequest) Decode(payload []byte, bigEndian bool, tc *TypeCache) error {
	r := NewReader(payload, bigEndian, "CMD_RPC")
	m.SID, m.IOID, m.Subcmd = ReadRequestHead(&r)
	field := "argument"
	if m.IsInit() {
		field = "pvRequest"
	}
	m.Value = ReadTypeValue(&r, field, tc)
	return r.Err()
}

// AppendRPCRequest appends an RPC request message.
func AppendRPCRequest(dst []byte, flags uint8, m *RPCRequest) []byte {
	w, start := NewRequest(dst, flags, CmdRPC, m.SID, m.IOID, m.Subcmd)
	AppendTypeValue(&w, m.Value)
	return FinishMessage(w.B, start)
}

// RPCReply is an RPC server message: INIT reply (Status only, no type) or
// EXEC reply (Status, then on success the result as "type + full value";
// no BitSet).
type RPCReply struct {
	IOID   uint32
	Subcmd uint8
	Status Status
	Value  *Value // EXEC success only; nil = null type
}

// IsInit reports an INIT reply.
func (m *RPCReply) IsInit() bool { return m.Subcmd&SubcmdInit != 0 }

// Decode decodes an RPC reply. tc is the connection's server→client cache.
func (m *RPCReply) Decode(payload []byte, bigEndian bool, tc *TypeCache) error {
	r := NewReader(payload, bigEndian, "CMD_RPC(reply)")
	m.IOID, m.Subcmd = ReadReplyHead(&r)
	m.Status = r.Status("status")
	m.Value = nil
	if !r.Failed() && !m.IsInit() && m.Status.OK() {
		m.Value = ReadTypeValue(&r, "result", tc)
	}
	return r.Err()
}

// AppendRPCReply appends an RPC reply message; Value is written only for
// an EXEC reply with a success status.
func AppendRPCReply(dst []byte, flags uint8, m *RPCReply) []byte {
	w, start := NewReply(dst, flags, CmdRPC, m.IOID, m.Subcmd)
	w.Status(m.Status)
	if !m.IsInit() && m.Status.OK() {
		AppendTypeValue(&w, m.Value)
	}
	return FinishMessage(w.B, start)
}

// GetRequest is a GET (0x0A) client message: INIT carries the pvRequest
// ("type + full value"); EXEC carries nothing after the sub-command.
type GetRequest struct {
	SID       uint32
	IOID      uint32
	Subcmd    uint8
	PVRequest *Value // INIT only
}

// IsInit reports an INIT request.
func (m *GetRequest) IsInit() bool { return m.Subcmd&SubcmdInit != 0 }

// Decode decodes a GET request.
func (m *GetRequest) Decode(payload []byte, bigEndian bool, tc *TypeCache) error {
	r := NewReader(payload, bigEndian, "CMD_GET")
	m.SID, m.IOID, m.Subcmd = ReadRequestHead(&r)
	m.PVRequest = ReadPVRequest(&r, m.IsInit(), tc)
	return r.Err()
}

// GetReply is a GET server message. INIT reply: Status, then on success the
// value's Type (descriptor only). EXEC reply: Status, then on success the
// Changed BitSet and the partial Value it selects.
type GetReply struct {
	IOID    uint32
	Subcmd  uint8
	Status  Status
	Type    *FieldDesc // INIT
	Changed BitSet     // EXEC
	Value   *Value     // EXEC
}

// IsInit reports an INIT reply.
func (m *GetReply) IsInit() bool { return m.Subcmd&SubcmdInit != 0 }

// AppendGetReply appends a GET reply. For an EXEC reply a nil Changed
// means "everything" (bit 0: the whole structure, then the full value).
func AppendGetReply(dst []byte, flags uint8, m *GetReply) []byte {
	w, start := NewReply(dst, flags, CmdGet, m.IOID, m.Subcmd)
	w.Status(m.Status)
	if m.Status.OK() {
		if m.IsInit() {
			AppendFieldDesc(&w, m.Type)
		} else if m.Value != nil {
			changed := m.Changed
			if changed == nil {
				changed = BitSet{1}
			}
			AppendChanged(&w, changed, m.Value)
		}
	}
	return FinishMessage(w.B, start)
}
