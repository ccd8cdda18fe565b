package sim

import "github.com/pvans-project/pvans/internal/pva"

// The channel operations a small IOC serves besides GET and RPC, which
// pvans itself never sends nor serves: GET_FIELD (pvxinfo), PUT (pvxput)
// and MONITOR (pvxmonitor). The simulator decodes the requests and
// encodes the replies; the other direction, a client's, is in this
// package's tests. Layouts follow PVXS 1.5.2 (serverintrospect.cpp,
// serverget.cpp handle_GPR, servermon.cpp; the client side in
// clientintrospect.cpp, clientget.cpp, clientmon.cpp).

// Further sub-command bits of PUT and MONITOR.
const (
	// SubcmdMonitorStartStop marks a MONITOR start (with SubcmdGet) or
	// stop (without) request.
	SubcmdMonitorStartStop = 0x04
	// SubcmdMonitorStart is what a PVXS client sends to start updates.
	SubcmdMonitorStart = SubcmdMonitorStartStop | pva.SubcmdGet
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
	r := pva.NewReader(payload, bigEndian, "CMD_GET_FIELD")
	m.SID = r.U32("sid")
	m.IOID = r.U32("ioid")
	m.SubField = r.String("subField")
	return r.Err()
}

// GetFieldReply is the server's answer: IOID, Status, then on success the
// type descriptor. Unlike GET/PUT there is no sub-command byte.
type GetFieldReply struct {
	IOID   uint32
	Status pva.Status
	Type   *pva.FieldDesc
}

// AppendGetFieldReply appends a GET_FIELD reply; Type only on success.
func AppendGetFieldReply(dst []byte, flags uint8, m *GetFieldReply) []byte {
	w, start := pva.NewMessage(dst, flags, pva.CmdGetField)
	w.U32(m.IOID)
	w.Status(m.Status)
	if m.Status.OK() {
		pva.AppendFieldDesc(&w, m.Type)
	}
	return pva.FinishMessage(w.B, start)
}

// PutRequest is PUT (0x0B), client → server. INIT (SubcmdInit) carries the
// pvRequest; EXEC with SubcmdGet asks for the current value (PVXS's
// "get before put"); any other EXEC carries the Changed BitSet and the
// partial Value to write.
type PutRequest struct {
	SID       uint32
	IOID      uint32
	Subcmd    uint8
	PVRequest *pva.Value // INIT
	Changed   pva.BitSet // put EXEC
	Value     *pva.Value // put EXEC
}

// IsInit reports an INIT request.
func (m *PutRequest) IsInit() bool { return m.Subcmd&pva.SubcmdInit != 0 }

// IsGet reports an EXEC that reads the current value instead of writing.
func (m *PutRequest) IsGet() bool { return m.Subcmd&pva.SubcmdGet != 0 }

// Decode decodes a PUT request. A put EXEC needs typ, the type the server
// announced in its INIT reply; the partial value is read into a new value
// of that type (unselected fields zero).
func (m *PutRequest) Decode(payload []byte, bigEndian bool, tc *pva.TypeCache, typ *pva.FieldDesc) error {
	r := pva.NewReader(payload, bigEndian, "CMD_PUT")
	m.SID, m.IOID, m.Subcmd = pva.ReadRequestHead(&r)
	m.PVRequest, m.Value = pva.ReadPVRequest(&r, m.IsInit(), tc), nil
	if !r.Failed() && !m.IsInit() && !m.IsGet() {
		m.Changed, m.Value = pva.ReadChanged(&r, tc, typ, m.Changed, nil)
	}
	return r.Err()
}

// PutReply is the server's PUT answer: INIT → Status + Type; get EXEC →
// Status + Changed + partial Value; put EXEC → Status only. The
// sub-command echoes the request's (a PVXS client checks it).
type PutReply struct {
	IOID    uint32
	Subcmd  uint8
	Status  pva.Status
	Type    *pva.FieldDesc // INIT
	Changed pva.BitSet     // get EXEC
	Value   *pva.Value     // get EXEC
}

// IsInit reports an INIT reply.
func (m *PutReply) IsInit() bool { return m.Subcmd&pva.SubcmdInit != 0 }

// AppendPutReply appends a PUT reply.
func AppendPutReply(dst []byte, flags uint8, m *PutReply) []byte {
	w, start := pva.NewReply(dst, flags, pva.CmdPut, m.IOID, m.Subcmd)
	w.Status(m.Status)
	switch {
	case !m.Status.OK():
	case m.IsInit():
		pva.AppendFieldDesc(&w, m.Type)
	case m.Subcmd&pva.SubcmdGet != 0 && m.Value != nil:
		pva.AppendChanged(&w, m.Changed, m.Value)
	}
	return pva.FinishMessage(w.B, start)
}

// MonitorRequest is MONITOR (0x0D), client → server: INIT (pvRequest),
// start/stop (SubcmdMonitorStartStop, SubcmdGet = start), ack
// (SubcmdMonitorAck: Nack follows, also on INIT as the initial window), or
// destroy (SubcmdDestroy). PVXS accepts several bits at once.
type MonitorRequest struct {
	SID       uint32
	IOID      uint32
	Subcmd    uint8
	PVRequest *pva.Value // INIT
	Nack      uint32     // when Subcmd&SubcmdMonitorAck
}

// IsInit reports an INIT request.
func (m *MonitorRequest) IsInit() bool { return m.Subcmd&pva.SubcmdInit != 0 }

// Decode decodes a MONITOR request.
func (m *MonitorRequest) Decode(payload []byte, bigEndian bool, tc *pva.TypeCache) error {
	r := pva.NewReader(payload, bigEndian, "CMD_MONITOR")
	m.SID, m.IOID, m.Subcmd = pva.ReadRequestHead(&r)
	m.PVRequest, m.Nack = pva.ReadPVRequest(&r, m.IsInit(), tc), 0
	if !r.Failed() && m.Subcmd&SubcmdMonitorAck != 0 {
		m.Nack = r.U32("nack")
	}
	return r.Err()
}

// MonitorReply is a MONITOR server message: the INIT reply (Status, then
// on success the Type), an update (sub-command 0: Changed BitSet, partial
// Value, then the overrun BitSet, which PVXS always sends empty), or the
// end of the subscription (SubcmdDestroy: Status).
type MonitorReply struct {
	IOID    uint32
	Subcmd  uint8
	Status  pva.Status     // INIT and finish
	Type    *pva.FieldDesc // INIT
	Changed pva.BitSet     // update
	Value   *pva.Value     // update
	Overrun pva.BitSet     // update
}

// IsInit reports an INIT reply.
func (m *MonitorReply) IsInit() bool { return m.Subcmd&pva.SubcmdInit != 0 }

// IsFinish reports the server's end of the subscription.
func (m *MonitorReply) IsFinish() bool { return !m.IsInit() && m.Subcmd&pva.SubcmdDestroy != 0 }

// AppendMonitorReply appends a MONITOR reply (see MonitorReply).
func AppendMonitorReply(dst []byte, flags uint8, m *MonitorReply) []byte {
	w, start := pva.NewReply(dst, flags, pva.CmdMonitor, m.IOID, m.Subcmd)
	switch {
	case m.IsInit():
		w.Status(m.Status)
		if m.Status.OK() {
			pva.AppendFieldDesc(&w, m.Type)
		}
	case m.IsFinish():
		w.Status(m.Status)
	case m.Value != nil:
		pva.AppendChanged(&w, m.Changed, m.Value)
		pva.AppendBitSet(&w, m.Overrun)
	default: // no value: an empty update
		pva.AppendBitSet(&w, nil)
		pva.AppendBitSet(&w, m.Overrun)
	}
	return pva.FinishMessage(w.B, start)
}
