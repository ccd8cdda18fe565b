package pva

// Operation sub-commands (the u8 after SID/IOID in GET/PUT/RPC/...).
const (
	SubcmdExec    = 0x00
	SubcmdInit    = 0x08
	SubcmdDestroy = 0x10 // destroy the operation after this reply (pvAccessCPP lastRequest)
	SubcmdGet     = 0x40
)

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
	m.SID = r.U32("sid")
	m.IOID = r.U32("ioid")
	m.Subcmd = r.U8("subcmd")
	field := "argument"
	if m.IsInit() {
		field = "pvRequest"
	}
	m.Value = ReadTypeValue(&r, field, tc)
	return r.Err()
}

// AppendRPCRequest appends an RPC request message.
func AppendRPCRequest(dst []byte, flags uint8, m *RPCRequest) []byte {
	w, start := newMessage(dst, flags, CmdRPC)
	w.U32(m.SID)
	w.U32(m.IOID)
	w.U8(m.Subcmd)
	AppendTypeValue(&w, m.Value)
	return finishMessage(w.B, start)
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
	m.IOID = r.U32("ioid")
	m.Subcmd = r.U8("subcmd")
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
	w, start := newMessage(dst, flags, CmdRPC)
	w.U32(m.IOID)
	w.U8(m.Subcmd)
	w.Status(m.Status)
	if !m.IsInit() && m.Status.OK() {
		AppendTypeValue(&w, m.Value)
	}
	return finishMessage(w.B, start)
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
	m.SID = r.U32("sid")
	m.IOID = r.U32("ioid")
	m.Subcmd = r.U8("subcmd")
	m.PVRequest = nil
	if !r.Failed() && m.IsInit() {
		m.PVRequest = ReadTypeValue(&r, "pvRequest", tc)
	}
	return r.Err()
}

// AppendGetRequest appends a GET request message.
func AppendGetRequest(dst []byte, flags uint8, m *GetRequest) []byte {
	w, start := newMessage(dst, flags, CmdGet)
	w.U32(m.SID)
	w.U32(m.IOID)
	w.U8(m.Subcmd)
	if m.IsInit() {
		AppendTypeValue(&w, m.PVRequest)
	}
	return finishMessage(w.B, start)
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

// Decode decodes a GET reply. An EXEC reply needs typ, the Type from this
// operation's INIT reply; its partial value is applied to m.Value (kept
// from the previous EXEC if it has that type, else a new zero value), so
// fields not in Changed keep their previous values, as a client expects.
func (m *GetReply) Decode(payload []byte, bigEndian bool, tc *TypeCache, typ *FieldDesc) error {
	r := NewReader(payload, bigEndian, "CMD_GET(reply)")
	m.IOID = r.U32("ioid")
	m.Subcmd = r.U8("subcmd")
	m.Status = r.Status("status")
	if r.Failed() || !m.Status.OK() {
		return r.Err()
	}
	if m.IsInit() {
		m.Type = ReadFieldDesc(&r, "type", tc)
		if !r.Failed() && m.Type == nil {
			r.Fail("type", "null type")
		}
		return r.Err()
	}
	if typ == nil {
		r.Fail("value", "no type from an INIT reply")
		return r.Err()
	}
	m.Changed = ReadBitSet(&r, "changed", m.Changed)
	if r.Failed() {
		return r.Err()
	}
	if m.Value == nil || m.Value.Type != typ {
		m.Value = NewValue(typ)
	}
	ReadPartialValue(&r, "value", m.Value, m.Changed, tc)
	return r.Err()
}

// AppendGetReply appends a GET reply. For an EXEC reply a nil Changed
// means "everything" (bit 0: the whole structure, then the full value).
func AppendGetReply(dst []byte, flags uint8, m *GetReply) []byte {
	w, start := newMessage(dst, flags, CmdGet)
	w.U32(m.IOID)
	w.U8(m.Subcmd)
	w.Status(m.Status)
	if m.Status.OK() {
		if m.IsInit() {
			AppendFieldDesc(&w, m.Type)
		} else if m.Value != nil {
			changed := m.Changed
			if changed == nil {
				changed = BitSet{1}
			}
			AppendBitSet(&w, changed)
			AppendPartialValue(&w, m.Value, changed)
		}
	}
	return finishMessage(w.B, start)
}
