package sim

import (
	"net"
	"net/netip"
	"sync"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
)

// Each accepted connection is a pvaconn server-role connection (greeting,
// validation, ECHO, framing, segments, bounded send queue) over a holdConn,
// which lets the simulator go silent with the socket open. What a PVXS
// server does per channel operation is here (docs/protocol.md, "The
// server PV"; PVXS src/serverget.cpp, servermon.cpp, serverintrospect.cpp).

const serverPV = "server"

// getChanged selects value, the alarm leaves and the timeStamp leaves
// (pre-order bits 1, 3-5, 7-9), the way a PVXS server marks the fields it
// has set, rather than "bit 0 = everything".
var getChanged = func() pva.BitSet {
	var b pva.BitSet
	for _, i := range []int{1, 3, 4, 5, 7, 8, 9} {
		b.Set(i)
	}
	return b
}()

// valueBit is the NTScalar `value` field's bit.
const valueBit = 1

var ntScalarDouble = pva.NTScalarDoubleType()

// channel is one created channel on one connection.
type channel struct {
	cid    uint32
	name   string
	server bool // the `server` PV
}

// opKind is what an IOID was created as.
type opKind uint8

const (
	opGet opKind = iota
	opPut
	opRPC
	opMonitor
)

type op struct {
	kind opKind
	ch   *channel
	mon  *monitor
}

// handler serves one connection; Message runs on its read goroutine, so
// chans and ops need no lock. Monitors are posted to from other
// goroutines and carry their own.
type handler struct {
	in    *instance
	types pva.TypeCache // client→server descriptor cache
	chans map[uint32]*channel
	ops   map[uint32]*op
	sid   uint32
	srch  pva.Search
	cids  []uint32
}

func newHandler(in *instance) *handler {
	return &handler{in: in, chans: map[uint32]*channel{}, ops: map[uint32]*op{}, sid: 0x01030507}
}

func (h *handler) opts() *Options { return &h.in.srv.site.opts }

func (h *handler) send(c *pvaconn.Conn, b []byte) { _ = c.Send(b) }

// Message handles one request; a malformed one closes the connection, as
// PVXS does ("Protocol decode fault").
func (h *handler) Message(c *pvaconn.Conn, hd pva.Header, p []byte) {
	if h.in.silent.Load() {
		return // held by holdConn anyway; nothing changes while silent
	}
	be := hd.BigEndian()
	ok := true
	switch hd.Command {
	case pva.CmdSearch:
		ok = h.onSearch(c, p, be)
	case pva.CmdCreateChannel:
		ok = h.onCreate(c, p, be)
	case pva.CmdDestroyChannel:
		ok = h.onDestroyChannel(c, p, be)
	case pva.CmdGetField:
		ok = h.onGetField(c, p, be)
	case pva.CmdGet:
		ok = h.onGet(c, p, be)
	case pva.CmdPut:
		ok = h.onPut(c, p, be)
	case pva.CmdMonitor:
		ok = h.onMonitor(c, p, be)
	case pva.CmdRPC:
		ok = h.onRPC(c, p, be)
	case pva.CmdDestroyRequest:
		var m pva.RequestRef
		if ok = m.Decode(p, be) == nil; ok {
			h.destroyOp(m.IOID)
		}
	}
	// CANCEL_REQUEST: every operation here completes at once, nothing to
	// cancel. Anything else is drained and ignored, as PVXS does.
	if !ok {
		c.Close()
	}
}

// Closed ends the connection's subscriptions.
func (h *handler) Closed(*pvaconn.Conn, error) {
	for ioid := range h.ops {
		h.destroyOp(ioid)
	}
}

func (h *handler) destroyOp(ioid uint32) {
	o, ok := h.ops[ioid]
	if !ok {
		return
	}
	delete(h.ops, ioid)
	if o.mon != nil {
		h.in.unsubscribe(o.mon)
	}
}

func (h *handler) onSearch(c *pvaconn.Conn, p []byte, be bool) bool {
	s := &h.srch
	if err := s.Decode(p, be); err != nil {
		return false // PVXS: malformed search over TCP → disconnect
	}
	if h.opts().NoTCPSearch || len(s.Names) == 0 && h.opts().NoPing {
		return true
	}
	if h.opts().Java {
		// PVAServer over TCP (SearchCommandHandler): a search without
		// names is not answered; each name as over UDP, but a ping reply
		// keeps the sequence ID and every reply names "this connection".
		for _, a := range javaAnswers(h.in.srv.names.Load(), s.Names) {
			r := pva.SearchResponse{GUID: h.in.guid, Seq: s.Seq, Addr: pva.AnyIPv4, Protocol: protoTCP}
			if !a.ping {
				r.Found, r.CIDs = true, append(h.cids[:0], a.cid)
			}
			h.send(c, pva.AppendSearchResponse(nil, c.Flags(), &r))
		}
		return true
	}
	if h.opts().TCPSearchOverUDP {
		if s.ReplyPort != 0 {
			to := c.Remote().Addr()
			if !s.ReplyAddr.IsAny() {
				to = s.ReplyAddr.Addr()
			}
			_, h.cids = h.in.answerUDP(s, netip.AddrPortFrom(to, s.ReplyPort), nil, h.cids)
		}
		return true
	}
	// PVXS's master branch answers a TCP search whatever its protocol
	// list; its tls branch (serverchan.cpp handle_SEARCH) answers only a
	// search that lists "tcp", or "tls" before it: a list with neither gets
	// no reply at all, not even to MustReply. A simulated server with a
	// TLS port behaves as the tls branch.
	if h.in.tlsPort != 0 && !s.HasProtocol("tcp") && !tlsBeforeTCP(s.Protocols) {
		return true
	}
	h.cids = h.in.claim(s.Names, h.cids[:0])
	if len(h.cids) == 0 && !s.MustReply() {
		return true
	}
	port, proto := h.in.tcpPort, protoTCP
	if h.in.tlsPort != 0 && tlsBeforeTCP(s.Protocols) {
		port, proto = h.in.tlsPort, protoTLS
	}
	h.send(c, pva.AppendSearchResponse(nil, c.Flags(), &pva.SearchResponse{
		GUID: h.in.guid, Seq: s.Seq, Addr: pva.AnyIPv4, Port: port,
		Protocol: proto, Found: len(h.cids) > 0, CIDs: h.cids,
	}))
	return true
}

// tlsBeforeTCP is PVXS's TCP rule (serverchan.cpp handle_SEARCH): the
// protocol list is read only up to "tcp", so "tls" counts only before it
// (["tls","tcp"], as a PVXS client with a keychain sends).
func tlsBeforeTCP(ps [][]byte) bool {
	for _, p := range ps {
		switch string(p) {
		case "tcp":
			return false
		case "tls":
			return true
		}
	}
	return false
}

func (h *handler) onCreate(c *pvaconn.Conn, p []byte, be bool) bool {
	var m pva.CreateChannel
	if err := m.Decode(p, be); err != nil {
		return false
	}
	if h.opts().IgnoreChannels {
		return true
	}
	for _, rq := range m.Channels {
		if h.opts().Java && h.lookup(rq.Name) == nil {
			// CreateChannelHandler: "Channel create request for unknown
			// PV" logged at WARNING, and nothing sent.
			h.in.srv.unknown.Add(1)
			continue
		}
		r := pva.CreateChannelReply{CID: rq.CID, SID: pva.RefusedSID,
			Status: pva.Status{Type: pva.StatusFatal, Message: "Refused to create Channel", Stack: "pvx:serv:refusechan:"}}
		if ch := h.lookup(rq.Name); ch != nil && !h.opts().RefuseChannels {
			ch.cid = rq.CID
			r.SID, r.Status = h.sid, pva.Status{}
			h.chans[h.sid] = ch
			h.sid++
		}
		h.send(c, pva.AppendCreateChannelReply(nil, c.Flags(), &r))
	}
	return true
}

// lookup returns a new channel for name if this server serves it.
func (h *handler) lookup(name string) *channel {
	if name == serverPV && !h.opts().Java {
		return &channel{name: name, server: true}
	}
	if _, ok := h.in.srv.names.Load().index[name]; !ok {
		return nil
	}
	return &channel{name: name}
}

func (h *handler) onDestroyChannel(c *pvaconn.Conn, p []byte, be bool) bool {
	var m pva.DestroyChannel
	if err := m.Decode(p, be); err != nil {
		return false
	}
	ch, ok := h.chans[m.SID]
	if !ok {
		return true // unknown SID: ignored
	}
	delete(h.chans, m.SID)
	for ioid, o := range h.ops {
		if o.ch == ch {
			h.destroyOp(ioid)
		}
	}
	h.send(c, pva.AppendDestroyChannel(nil, c.Flags(), &m))
	return true
}

// newOp registers an INIT; PVXS drops a connection that reuses a live
// IOID or names an unknown SID.
func (h *handler) newOp(sid, ioid uint32, kind opKind) (*op, bool) {
	ch, ok := h.chans[sid]
	if !ok {
		return nil, false
	}
	if _, dup := h.ops[ioid]; dup {
		return nil, false
	}
	o := &op{kind: kind, ch: ch}
	h.ops[ioid] = o
	return o, true
}

// execOp finds the operation an EXEC names. A non-existent IOID is
// ignored (PVXS: it may race with a destroy); one of another kind is a
// protocol fault.
func (h *handler) execOp(ioid uint32, kind opKind) (o *op, ignore, ok bool) {
	o, found := h.ops[ioid]
	if !found {
		return nil, true, true
	}
	return o, false, o.kind == kind
}

// initOp registers an INIT. The server channel serves RPC alone: another
// operation on it is refused (the reply's status) and not kept, o nil.
func (h *handler) initOp(sid, ioid uint32, kind opKind, what string) (o *op, refused pva.Status, ok bool) {
	if o, ok = h.newOp(sid, ioid, kind); ok && o.ch.server {
		delete(h.ops, ioid)
		return nil, notSupported(what), true
	}
	return o, pva.Status{}, ok
}

// opResult is what a GET or PUT reply carries.
type opResult struct {
	status  pva.Status
	typ     *pva.FieldDesc
	changed pva.BitSet
	value   *pva.Value
}

// serveOp does what GET and PUT share: an INIT registers the operation
// and answers with the value's type (or the server channel's refusal);
// an EXEC of a live operation is exec's to answer; the destroy bit ends
// the operation. reply false: nothing to send (an EXEC racing a
// destroy); ok false: a protocol fault.
func (h *handler) serveOp(sid, ioid uint32, subcmd uint8, kind opKind, what string, exec func(*op, *opResult)) (r opResult, reply, ok bool) {
	if subcmd&pva.SubcmdInit != 0 {
		o, refused, ok := h.initOp(sid, ioid, kind, what)
		if !ok {
			return r, false, false
		}
		if r.status = refused; o != nil {
			r.typ = ntScalarDouble
		}
	} else {
		o, ignore, ok := h.execOp(ioid, kind)
		if ignore || !ok {
			return r, false, ok
		}
		exec(o, &r)
	}
	if subcmd&pva.SubcmdDestroy != 0 {
		h.destroyOp(ioid)
	}
	return r, true, true
}

func notSupported(what string) pva.Status {
	return pva.Status{Type: pva.StatusError, Message: what + " not implemented for this PV"}
}

func (h *handler) onGetField(c *pvaconn.Conn, p []byte, be bool) bool {
	var m GetFieldRequest
	if err := m.Decode(p, be); err != nil {
		return false
	}
	ch, ok := h.chans[m.SID]
	if !ok {
		return true // PVXS logs and ignores
	}
	r := GetFieldReply{IOID: m.IOID, Type: ntScalarDouble}
	if ch.server {
		r.Status = notSupported("Info")
	}
	h.send(c, AppendGetFieldReply(nil, c.Flags(), &r))
	return true
}

// current is the channel's value now, as a full NTScalar with a time
// stamp.
func (h *handler) current(ch *channel) *pva.Value {
	x, at := h.in.value(ch.name)
	v := pva.NewNTScalarDouble(x)
	v.Field("timeStamp.secondsPastEpoch").Int = at.Unix()
	v.Field("timeStamp.nanoseconds").Int = int64(at.Nanosecond())
	return v
}

func (h *handler) onGet(c *pvaconn.Conn, p []byte, be bool) bool {
	var m pva.GetRequest
	if err := m.Decode(p, be, &h.types); err != nil {
		return false
	}
	r, reply, ok := h.serveOp(m.SID, m.IOID, m.Subcmd, opGet, "GET", func(o *op, r *opResult) {
		r.value, r.changed = h.current(o.ch), getChanged
	})
	if reply {
		h.send(c, pva.AppendGetReply(nil, c.Flags(), &pva.GetReply{IOID: m.IOID, Subcmd: m.Subcmd,
			Status: r.status, Type: r.typ, Changed: r.changed, Value: r.value}))
	}
	return ok
}

func (h *handler) onPut(c *pvaconn.Conn, p []byte, be bool) bool {
	var m PutRequest
	if err := m.Decode(p, be, &h.types, ntScalarDouble); err != nil {
		return false
	}
	var tell []*monitor
	r, reply, ok := h.serveOp(m.SID, m.IOID, m.Subcmd, opPut, "PUT", func(o *op, r *opResult) {
		switch {
		case m.IsGet():
			r.value, r.changed = h.current(o.ch), getChanged
		case m.Changed.Has(0) || m.Changed.Has(valueBit):
			tell = h.in.put(o.ch.name, m.Value.Field("value").Float)
		}
		// Other fields (alarm, timeStamp) are the server's, as on an IOC
		// record: a put of them alone changes nothing.
	})
	if reply {
		h.send(c, AppendPutReply(nil, c.Flags(), &PutReply{IOID: m.IOID, Subcmd: m.Subcmd,
			Status: r.status, Type: r.typ, Changed: r.changed, Value: r.value}))
	}
	for _, mon := range tell {
		mon.changed()
	}
	return ok
}

func (h *handler) onMonitor(c *pvaconn.Conn, p []byte, be bool) bool {
	var m MonitorRequest
	if err := m.Decode(p, be, &h.types); err != nil {
		return false
	}
	if m.IsInit() {
		o, refused, ok := h.initOp(m.SID, m.IOID, opMonitor, "Monitor")
		if !ok {
			return false
		}
		r := MonitorReply{IOID: m.IOID, Subcmd: pva.SubcmdInit, Status: refused}
		if o != nil {
			r.Type = ntScalarDouble
			o.mon = &monitor{h: h, c: c, ch: o.ch, ioid: m.IOID, window: m.Nack, pipeline: pipelined(m.PVRequest)}
			h.in.subscribe(o.mon)
		}
		h.send(c, AppendMonitorReply(nil, c.Flags(), &r))
		return true
	}
	o, ignore, ok := h.execOp(m.IOID, opMonitor)
	if ignore || !ok {
		return ok
	}
	mon := o.mon
	if m.Subcmd&SubcmdMonitorAck != 0 {
		mon.ack(m.Nack)
	}
	if m.Subcmd&SubcmdMonitorStartStop != 0 {
		mon.start(m.Subcmd&pva.SubcmdGet != 0)
	}
	if m.Subcmd&pva.SubcmdDestroy != 0 {
		h.destroyOp(m.IOID)
	}
	return true
}

// pipelined reports record._options.pipeline=true in a pvRequest (a
// string, as pvRequest parsers make it, or a bool).
func pipelined(req *pva.Value) bool {
	if req == nil {
		return false
	}
	f := req.Field("record._options.pipeline")
	if f == nil {
		return false
	}
	switch f.Type.Code {
	case pva.TypeString:
		return f.Str == "true"
	case pva.TypeBool:
		return f.Int != 0
	}
	return false
}

// monitor is one subscription. Updates are squashed: while the client's
// window is closed (pipelined) or the monitor is stopped, only "there is
// news" is remembered, and the current value goes out when it opens, as a
// PVXS server with queueSize 1 would.
type monitor struct {
	h        *handler
	c        *pvaconn.Conn
	ch       *channel
	ioid     uint32
	pipeline bool

	mu      sync.Mutex
	running bool
	window  uint32
	pending bool
}

func (m *monitor) start(run bool) {
	m.mu.Lock()
	m.running = run
	if run {
		m.pending = true // the first update is the current value
	}
	m.mu.Unlock()
	m.post()
}

func (m *monitor) ack(n uint32) {
	m.mu.Lock()
	m.window += n
	m.mu.Unlock()
	m.post()
}

// changed marks news and sends it if the client can take it.
func (m *monitor) changed() {
	m.mu.Lock()
	m.pending = true
	m.mu.Unlock()
	m.post()
}

func (m *monitor) post() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.running || !m.pending || (m.pipeline && m.window == 0) || m.h.in.silent.Load() {
		return
	}
	m.pending = false
	if m.pipeline {
		m.window--
	}
	_ = m.c.Send(AppendMonitorReply(nil, m.c.Flags(), &MonitorReply{IOID: m.ioid, Changed: getChanged, Value: m.h.current(m.ch)}))
}

// holdConn blocks reads (keeping what was read) and writes while its
// instance is silent: to a peer the server looks hung (SIGSTOP, a pulled
// cable), not closed. Revive releases it; Close ends it.
type holdConn struct {
	net.Conn
	in   *instance
	once sync.Once
	done chan struct{}
}

func (c *holdConn) hold() bool {
	for {
		ch := c.in.heldCh()
		if ch == nil {
			return true
		}
		select {
		case <-ch:
		case <-c.done:
			return false
		}
	}
}

func (c *holdConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if !c.hold() {
		return 0, net.ErrClosed
	}
	return n, err
}

func (c *holdConn) Write(b []byte) (int, error) {
	if !c.hold() {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

func (c *holdConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

// onRPC serves the `server` PV as PVXS's ServerSource does
// (docs/protocol.md, "The listing RPC").
func (h *handler) onRPC(c *pvaconn.Conn, p []byte, be bool) bool {
	var m pva.RPCRequest
	// The INIT pvRequest is decoded too: it keeps the type cache in step
	// (pvlist defines cache keys in it).
	if err := m.Decode(p, be, &h.types); err != nil {
		return false
	}
	ch, ok := h.chans[m.SID]
	if !ok {
		return true
	}
	// The reply echoes the request's sub-command, 0x10 included (capture #61).
	r := pva.RPCReply{IOID: m.IOID, Subcmd: m.Subcmd}
	opts := h.opts()
	switch {
	case !ch.server:
		r.Status = notSupported("RPC")
	case m.IsInit():
	case opts.RPCError != "":
		r.Status = pva.Status{Type: pva.StatusError, Message: opts.RPCError}
	default:
		_, name, err := pva.NTURIOp(m.Value)
		switch {
		case err != nil:
			r.Status = pva.Status{Type: pva.StatusError, Message: "Missing required .query.op"}
		case name == pva.OpChannels:
			r.Value = pva.NewChannelList(h.in.srv.names.Load().sorted)
			h.in.srv.listings.Add(1)
		case name == pva.OpInfo:
			r.Value = pva.NewServerInfo("cpp", opts.Version)
		default:
			r.Status = pva.Status{Type: pva.StatusError, Message: "Not implemented"}
		}
	}
	h.send(c, pva.AppendRPCReply(nil, c.Flags(), &r))
	return true
}
