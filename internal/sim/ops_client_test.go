package sim

import "github.com/pvans-project/pvans/internal/pva"

// The client's side of the operations the simulator serves (ops.go, and
// GET from pva): what pvxinfo, pvxget, pvxput and pvxmonitor send and
// read. Only tests speak it, so it lives here.

// AppendGetFieldRequest appends a GET_FIELD request.
func AppendGetFieldRequest(dst []byte, flags uint8, m *GetFieldRequest) []byte {
	w, start := pva.NewMessage(dst, flags, pva.CmdGetField)
	w.U32(m.SID)
	w.U32(m.IOID)
	w.String(m.SubField)
	return pva.FinishMessage(w.B, start)
}

// Decode decodes a GET_FIELD reply. tc is the server→client type cache.
func (m *GetFieldReply) Decode(payload []byte, bigEndian bool, tc *pva.TypeCache) error {
	r := pva.NewReader(payload, bigEndian, "CMD_GET_FIELD(reply)")
	m.IOID = r.U32("ioid")
	m.Status = r.Status("status")
	m.Type = nil
	if !r.Failed() && m.Status.OK() {
		m.Type = pva.ReadFieldDesc(&r, "type", tc)
	}
	return r.Err()
}

// AppendGetRequest appends a GET request.
func AppendGetRequest(dst []byte, flags uint8, m *pva.GetRequest) []byte {
	w, start := pva.NewRequest(dst, flags, pva.CmdGet, m.SID, m.IOID, m.Subcmd)
	appendPVRequest(&w, m.IsInit(), m.PVRequest)
	return pva.FinishMessage(w.B, start)
}

// decodeGetReply decodes a GET reply into m (see pva.GetReply): an EXEC
// reply needs typ, the INIT reply's type.
func decodeGetReply(m *pva.GetReply, payload []byte, bigEndian bool, tc *pva.TypeCache, typ *pva.FieldDesc) error {
	r := pva.NewReader(payload, bigEndian, "CMD_GET(reply)")
	m.IOID, m.Subcmd = pva.ReadReplyHead(&r)
	m.Status = r.Status("status")
	switch {
	case r.Failed() || !m.Status.OK():
	case m.IsInit():
		m.Type = readInitType(&r, tc)
	default:
		m.Changed, m.Value = pva.ReadChanged(&r, tc, typ, m.Changed, m.Value)
	}
	return r.Err()
}

// AppendPutRequest appends a PUT request.
func AppendPutRequest(dst []byte, flags uint8, m *PutRequest) []byte {
	w, start := pva.NewRequest(dst, flags, pva.CmdPut, m.SID, m.IOID, m.Subcmd)
	appendPVRequest(&w, m.IsInit(), m.PVRequest)
	if !m.IsInit() && !m.IsGet() && m.Value != nil {
		pva.AppendChanged(&w, m.Changed, m.Value)
	}
	return pva.FinishMessage(w.B, start)
}

// Decode decodes a PUT reply; typ is the INIT reply's type (get EXEC).
func (m *PutReply) Decode(payload []byte, bigEndian bool, tc *pva.TypeCache, typ *pva.FieldDesc) error {
	r := pva.NewReader(payload, bigEndian, "CMD_PUT(reply)")
	m.IOID, m.Subcmd = pva.ReadReplyHead(&r)
	m.Status = r.Status("status")
	m.Value = nil
	switch {
	case r.Failed() || !m.Status.OK():
	case m.IsInit():
		m.Type = readInitType(&r, tc)
	case m.Subcmd&pva.SubcmdGet != 0:
		m.Changed, m.Value = pva.ReadChanged(&r, tc, typ, m.Changed, nil)
	}
	return r.Err()
}

// AppendMonitorRequest appends a MONITOR request.
func AppendMonitorRequest(dst []byte, flags uint8, m *MonitorRequest) []byte {
	w, start := pva.NewRequest(dst, flags, pva.CmdMonitor, m.SID, m.IOID, m.Subcmd)
	appendPVRequest(&w, m.IsInit(), m.PVRequest)
	if m.Subcmd&SubcmdMonitorAck != 0 {
		w.U32(m.Nack)
	}
	return pva.FinishMessage(w.B, start)
}

// Decode decodes a MONITOR reply. An update needs typ (the INIT reply's);
// like a GET reply it applies the partial value to m.Value when that
// has the same type, so unchanged fields keep their previous values.
func (m *MonitorReply) Decode(payload []byte, bigEndian bool, tc *pva.TypeCache, typ *pva.FieldDesc) error {
	r := pva.NewReader(payload, bigEndian, "CMD_MONITOR(reply)")
	m.IOID, m.Subcmd = pva.ReadReplyHead(&r)
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
		m.Status = pva.Status{}
		m.Changed, m.Value = pva.ReadChanged(&r, tc, typ, m.Changed, m.Value)
		if !r.Failed() {
			m.Overrun = pva.ReadBitSet(&r, "overrun", m.Overrun)
		}
	}
	return r.Err()
}

// appendPVRequest writes the pvRequest an INIT request carries.
func appendPVRequest(w *pva.Writer, init bool, v *pva.Value) {
	if init {
		pva.AppendTypeValue(w, v)
	}
}

// readInitType reads the type an INIT reply announces. The null type is
// refused: the operation's values are read with it.
func readInitType(r *pva.Reader, tc *pva.TypeCache) *pva.FieldDesc {
	t := pva.ReadFieldDesc(r, "type", tc)
	if !r.Failed() && t == nil {
		r.Fail("type", "null type")
	}
	return t
}
