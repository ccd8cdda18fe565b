package ioc

import "github.com/pvans-project/pvans/internal/pva"

// The client's side of the operations the simulated IOCs serve
// (internal/sim/ops.go, and GET): pvans never sends them, so no package of
// its own carries them; this minimal client writes the few it sends.

// getFieldRequest is GET_FIELD for the channel's whole type.
func getFieldRequest(flags uint8, sid, ioid uint32) []byte {
	w, start := pva.NewMessage(nil, flags, pva.CmdGetField)
	w.U32(sid)
	w.U32(ioid)
	w.String("")
	return pva.FinishMessage(w.B, start)
}

// opRequest is a GET, PUT or MONITOR request: the pvRequest on INIT, the
// changed fields of v on a PUT EXEC (v non-nil), else nothing more.
func opRequest(flags uint8, cmd pva.Command, sid, ioid uint32, subcmd uint8, pvRequest *pva.Value, changed pva.BitSet, v *pva.Value) []byte {
	w, start := pva.NewRequest(nil, flags, cmd, sid, ioid, subcmd)
	switch {
	case subcmd&pva.SubcmdInit != 0:
		pva.AppendTypeValue(&w, pvRequest)
	case v != nil:
		pva.AppendChanged(&w, changed, v)
	}
	return pva.FinishMessage(w.B, start)
}

// opReply is what the client reads of a GET_FIELD, GET, PUT or MONITOR
// reply.
type opReply struct {
	Cmd    pva.Command
	IOID   uint32
	Subcmd uint8
	Status pva.Status
	Type   *pva.FieldDesc // GET_FIELD, INIT
	Value  *pva.Value     // GET EXEC, PUT get EXEC, MONITOR update
}

func (r *opReply) init() bool { return r.Subcmd&pva.SubcmdInit != 0 }

// finish: the server's end of a MONITOR subscription.
func (r *opReply) finish() bool {
	return r.Cmd == pva.CmdMonitor && !r.init() && r.Subcmd&pva.SubcmdDestroy != 0
}

// decode reads a reply; a value needs typ, the INIT reply's type. The
// partial value is applied to r.Value (fields not sent keep theirs).
func (r *opReply) decode(h pva.Header, p []byte, tc *pva.TypeCache, typ *pva.FieldDesc) error {
	rd := pva.NewReader(p, h.BigEndian(), h.Command.String())
	r.Cmd = h.Command
	if r.Cmd == pva.CmdGetField { // no sub-command
		r.IOID, r.Subcmd = rd.U32("ioid"), pva.SubcmdInit
	} else {
		r.IOID, r.Subcmd = pva.ReadReplyHead(&rd)
	}
	update := r.Cmd == pva.CmdMonitor && !r.init() && !r.finish()
	r.Status = pva.Status{} // an update carries none
	if !update {
		r.Status = rd.Status("status")
	}
	switch {
	case rd.Failed() || !r.Status.OK() || r.finish():
	case r.init():
		r.Type = pva.ReadFieldDesc(&rd, "type", tc)
	case update || r.Cmd == pva.CmdGet || r.Subcmd&pva.SubcmdGet != 0:
		_, r.Value = pva.ReadChanged(&rd, tc, typ, nil, r.Value)
		if update && !rd.Failed() {
			pva.ReadBitSet(&rd, "overrun", nil)
		}
	}
	return rd.Err()
}
