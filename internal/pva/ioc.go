package pva

// The channel operations a small IOC serves besides GET and RPC: GET_FIELD
// (pvxinfo), PUT (pvxput) and MONITOR (pvxmonitor). Layouts follow PVXS
// 1.5.2 (serverintrospect.cpp, serverget.cpp handle_GPR, servermon.cpp;
// the client side in clientintrospect.cpp, clientget.cpp, clientmon.cpp).

// Further sub-command bits of PUT and MONITOR.
const (
	// SubcmdMonitorStartStop marks a MONITOR start (with SubcmdGet) or
	// stop (without) request.
	SubcmdMonitorStartStop = 0x04
	// SubcmdMonitorStart is what a PVXS client sends to start updates.
	SubcmdMonitorStart = SubcmdMonitorStartStop | SubcmdGet
	// SubcmdMonitorAck carries a u32 count of updates the client consumed
	// (pipelined monitors); on INIT it carries the initial window.
	SubcmdMonitorAck = 0x80
)

// GetFieldRequest is GET_FIELD (0x11), client → server: the type of a
// channel (or of one sub-field; PVXS clients send "").
type GetFieldRequest struct {
	SID      uint32
	IOID     uint32
	SubField string
}

// Decode decodes a GET_FIELD request.
func (m *GetFieldRequest) Decode(payload []byte, bigEndian bool) error {
	r := NewReader(payload, bigEndian, "CMD_GET_FIELD")
	m.SID = r.U32("sid")
	m.IOID = r.U32("ioid")
	m.SubField = r.String("subField")
	return r.Err()
}

// AppendGetFieldRequest appends a GET_FIELD request.
func AppendGetFieldRequest(dst []byte, flags uint8, m *GetFieldRequest) []byte {
	w, start := newMessage(dst, flags, CmdGetField)
	w.U32(m.SID)
	w.U32(m.IOID)
	w.String(m.SubField)
	return finishMessage(w.B, start)
}

// GetFieldReply is the server's answer: IOID, Status, then on success the
// type descriptor. Unlike GET/PUT there is no sub-command byte.
type GetFieldReply struct {
	IOID   uint32
	Status Status
	Type   *FieldDesc
}

// Decode decodes a GET_FIELD reply. tc is the server→client type cache.
func (m *GetFieldReply) Decode(payload []byte, bigEndian bool, tc *TypeCache) error {
	r := NewReader(payload, bigEndian, "CMD_GET_FIELD(reply)")
	m.IOID = r.U32("ioid")
	m.Status = r.Status("status")
	m.Type = nil
	if !r.Failed() && m.Status.OK() {
		m.Type = ReadFieldDesc(&r, "type", tc)
	}
	return r.Err()
}

// AppendGetFieldReply appends a GET_FIELD reply; Type only on success.
func AppendGetFieldReply(dst []byte, flags uint8, m *GetFieldReply) []byte {
	w, start := newMessage(dst, flags, CmdGetField)
	w.U32(m.IOID)
	w.Status(m.Status)
	if m.Status.OK() {
		AppendFieldDesc(&w, m.Type)
	}
	return finishMessage(w.B, start)
}

// PutRequest is PUT (0x0B), client → server. INIT (SubcmdInit) carries the
// pvRequest; EXEC with SubcmdGet asks for the current value (PVXS's
// "get before put"); any other EXEC carries the Changed BitSet and the
// partial Value to write.
type PutRequest struct {
	SID       uint32
	IOID      uint32
	Subcmd    uint8
	PVRequest *Value // INIT
	Changed   BitSet // put EXEC
	Value     *Value // put EXEC
}

// IsInit reports an INIT request.
func (m *PutRequest) IsInit() bool { return m.Subcmd&SubcmdInit != 0 }

// IsGet reports an EXEC that reads the current value instead of writing.
func (m *PutRequest) IsGet() bool { return m.Subcmd&SubcmdGet != 0 }

// Decode decodes a PUT request. A put EXEC needs typ, the type the server
// announced in its INIT reply; the partial value is read into a new value
// of that type (unselected fields zero).
func (m *PutRequest) Decode(payload []byte, bigEndian bool, tc *TypeCache, typ *FieldDesc) error {
	r := NewReader(payload, bigEndian, "CMD_PUT")
	m.SID, m.IOID, m.Subcmd = readRequestHead(&r)
	m.PVRequest, m.Value = readPVRequest(&r, m.IsInit(), tc), nil
	if !r.Failed() && !m.IsInit() && !m.IsGet() {
		m.Changed, m.Value = readChanged(&r, tc, typ, m.Changed, nil)
	}
	return r.Err()
}

// AppendPutRequest appends a PUT request.
func AppendPutRequest(dst []byte, flags uint8, m *PutRequest) []byte {
	w, start := newRequest(dst, flags, CmdPut, m.SID, m.IOID, m.Subcmd)
	appendPVRequest(&w, m.IsInit(), m.PVRequest)
	if !m.IsInit() && !m.IsGet() && m.Value != nil {
		appendChanged(&w, m.Changed, m.Value)
	}
	return finishMessage(w.B, start)
}

// PutReply is the server's PUT answer: INIT → Status + Type; get EXEC →
// Status + Changed + partial Value; put EXEC → Status only. The
// sub-command echoes the request's (a PVXS client checks it).
type PutReply struct {
	IOID    uint32
	Subcmd  uint8
	Status  Status
	Type    *FieldDesc // INIT
	Changed BitSet     // get EXEC
	Value   *Value     // get EXEC
}

// IsInit reports an INIT reply.
func (m *PutReply) IsInit() bool { return m.Subcmd&SubcmdInit != 0 }

// Decode decodes a PUT reply; typ is the INIT reply's type (get EXEC).
func (m *PutReply) Decode(payload []byte, bigEndian bool, tc *TypeCache, typ *FieldDesc) error {
	r := NewReader(payload, bigEndian, "CMD_PUT(reply)")
	m.IOID, m.Subcmd = readReplyHead(&r)
	m.Status = r.Status("status")
	m.Value = nil
	switch {
	case r.Failed() || !m.Status.OK():
	case m.IsInit():
		m.Type = readInitType(&r, tc)
	case m.Subcmd&SubcmdGet != 0:
		m.Changed, m.Value = readChanged(&r, tc, typ, m.Changed, nil)
	}
	return r.Err()
}

// AppendPutReply appends a PUT reply.
func AppendPutReply(dst []byte, flags uint8, m *PutReply) []byte {
	w, start := newReply(dst, flags, CmdPut, m.IOID, m.Subcmd)
	w.Status(m.Status)
	switch {
	case !m.Status.OK():
	case m.IsInit():
		AppendFieldDesc(&w, m.Type)
	case m.Subcmd&SubcmdGet != 0 && m.Value != nil:
		appendChanged(&w, m.Changed, m.Value)
	}
	return finishMessage(w.B, start)
}

// MonitorRequest is MONITOR (0x0D), client → server: INIT (pvRequest),
// start/stop (SubcmdMonitorStartStop, SubcmdGet = start), ack
// (SubcmdMonitorAck: Nack follows, also on INIT as the initial window), or
// destroy (SubcmdDestroy). PVXS accepts several bits at once.
type MonitorRequest struct {
	SID       uint32
	IOID      uint32
	Subcmd    uint8
	PVRequest *Value // INIT
	Nack      uint32 // when Subcmd&SubcmdMonitorAck
}

// IsInit reports an INIT request.
func (m *MonitorRequest) IsInit() bool { return m.Subcmd&SubcmdInit != 0 }

// Decode decodes a MONITOR request.
func (m *MonitorRequest) Decode(payload []byte, bigEndian bool, tc *TypeCache) error {
	r := NewReader(payload, bigEndian, "CMD_MONITOR")
	m.SID, m.IOID, m.Subcmd = readRequestHead(&r)
	m.PVRequest, m.Nack = readPVRequest(&r, m.IsInit(), tc), 0
	if !r.Failed() && m.Subcmd&SubcmdMonitorAck != 0 {
		m.Nack = r.U32("nack")
	}
	return r.Err()
}

// AppendMonitorRequest appends a MONITOR request.
func AppendMonitorRequest(dst []byte, flags uint8, m *MonitorRequest) []byte {
	w, start := newRequest(dst, flags, CmdMonitor, m.SID, m.IOID, m.Subcmd)
	appendPVRequest(&w, m.IsInit(), m.PVRequest)
	if m.Subcmd&SubcmdMonitorAck != 0 {
		w.U32(m.Nack)
	}
	return finishMessage(w.B, start)
}

// MonitorReply is a MONITOR server message: the INIT reply (Status, then
// on success the Type), an update (sub-command 0: Changed BitSet, partial
// Value, then the overrun BitSet, which PVXS always sends empty), or the
// end of the subscription (SubcmdDestroy: Status).
type MonitorReply struct {
	IOID    uint32
	Subcmd  uint8
	Status  Status     // INIT and finish
	Type    *FieldDesc // INIT
	Changed BitSet     // update
	Value   *Value     // update
	Overrun BitSet     // update
}

// IsInit reports an INIT reply.
func (m *MonitorReply) IsInit() bool { return m.Subcmd&SubcmdInit != 0 }

// IsFinish reports the server's end of the subscription.
func (m *MonitorReply) IsFinish() bool { return !m.IsInit() && m.Subcmd&SubcmdDestroy != 0 }

// Decode decodes a MONITOR reply. An update needs typ (the INIT reply's);
// like GetReply.Decode it applies the partial value to m.Value when that
// has the same type, so unchanged fields keep their previous values.
func (m *MonitorReply) Decode(payload []byte, bigEndian bool, tc *TypeCache, typ *FieldDesc) error {
	r := NewReader(payload, bigEndian, "CMD_MONITOR(reply)")
	m.IOID, m.Subcmd = readReplyHead(&r)
	switch {
	case r.Failed():
	case m.IsInit():
		m.Status = r.Status("status")
		if !r.Failed() && m.Status.OK() {
			m.Type = readInitType(&r, tc)
		}
	case m.IsFinish():
		m.Status = r.Status("status")
	case typ == nil:
		r.Fail("value", "no type from an INIT reply")
	default:
		m.Status = Status{}
		m.Changed, m.Value = readChanged(&r, tc, typ, m.Changed, m.Value)
		if !r.Failed() {
			m.Overrun = ReadBitSet(&r, "overrun", m.Overrun)
		}
	}
	return r.Err()
}

// AppendMonitorReply appends a MONITOR reply (see MonitorReply).
func AppendMonitorReply(dst []byte, flags uint8, m *MonitorReply) []byte {
	w, start := newReply(dst, flags, CmdMonitor, m.IOID, m.Subcmd)
	switch {
	case m.IsInit():
		w.Status(m.Status)
		if m.Status.OK() {
			AppendFieldDesc(&w, m.Type)
		}
	case m.IsFinish():
		w.Status(m.Status)
	case m.Value != nil:
		appendChanged(&w, m.Changed, m.Value)
		AppendBitSet(&w, m.Overrun)
	default: // no value: an empty update
		AppendBitSet(&w, nil)
		AppendBitSet(&w, m.Overrun)
	}
	return finishMessage(w.B, start)
}
