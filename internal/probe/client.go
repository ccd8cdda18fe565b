package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/keychain"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
)

// ServerPV is the channel every PVXS and pvAccessCPP server serves for
// pvxlist/pvlist (docs/protocol.md, "The server PV").
const ServerPV = "server"

// tlsSeq marks our TLS-endpoint query ("tlsq"); the discovery ping's
// random sequence ID never takes it (see ping).
const tlsSeq = 0x746c7371

// ListError is a listing the server refused or answered with something we
// cannot use, on a connection that is otherwise fine: the server is alive
// but unlistable.
type ListError struct {
	Step   string // "create channel", "rpc init", "rpc exec", "decode"
	Status pva.Status
	Err    error
}

func (e *ListError) Error() string {
	if e.Err != nil {
		return "probe: " + e.Step + ": " + e.Err.Error()
	}
	return "probe: " + e.Step + ": " + e.Status.Error()
}

func (e *ListError) Unwrap() error { return e.Err }

// errConnLost is returned to waiters when the connection ends.
var errConnLost = errors.New("probe: connection closed")

type waitKind uint8

const (
	waitCreate waitKind = iota
	waitRPC
	waitEcho
)

// ServerPVGrace is how long the `server` channel's answer is still awaited
// once the server has answered the ECHO sent after the CREATE_CHANNEL.
// PVXS and pvAccessCPP create the `server` channel at once and answer a
// connection's requests in order; Phoebus core-pva's Java server has no
// `server` PV and never answers a CREATE_CHANNEL for a name it lacks (it
// logs a WARNING, CreateChannelHandler): an echo answered first shows
// that, without waiting for the probe's timeout. The grace is for a server
// that creates channels on another thread.
const ServerPVGrace = time.Second

// errNoServerPV: the server answered the echo sent after the
// CREATE_CHANNEL, and not the CREATE_CHANNEL within ServerPVGrace.
var errNoServerPV = errors.New("no answer, though later requests were answered: no `server` PV (a Phoebus core-pva server?)")

// echoMark starts the payload of the ECHO that follows a CREATE_CHANNEL;
// the CID follows it. Servers echo the payload back as it came.
var echoMark = [...]byte{'p', 'v', 'n', 's', 'c', 'r', 'e', 'a'}

func appendEchoMark(dst []byte, cid uint32) []byte {
	dst = append(dst, echoMark[:]...)
	return binary.LittleEndian.AppendUint32(dst, cid)
}

// echoMarked is the CID an echo payload carries, if it is one of ours.
func echoMarked(p []byte) (uint32, bool) {
	if len(p) != len(echoMark)+4 || string(p[:len(echoMark)]) != string(echoMark[:]) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(p[len(echoMark):]), true
}

type waitKey struct {
	kind waitKind
	id   uint32
}

type result struct {
	status pva.Status
	sid    uint32
	subcmd uint8
	value  *pva.Value
	err    error
}

// client is the probe's side of one connection to a server: a
// pvaconn.Handler that matches replies to the requests the probe goroutine
// sends. Decoding happens on the connection's read goroutine (the payload
// is only valid there, and the 0xFD/0xFE type cache must see the server's
// messages in order).
// Bounds of the descriptor cache a probed server fills.
const (
	probeMaxCachedTypes     = 64
	probeMaxCachedTypeBytes = 256 << 10
)

type client struct {
	p   *Prober
	s   *server
	log *zap.Logger
	tc  pva.TypeCache // server→client descriptors; read goroutine only

	mu      sync.Mutex
	conn    *pvaconn.Conn
	nextID  uint32
	waiters map[waitKey]chan result
	sid     uint32
	haveSID bool
	guid    chan pva.GUID // the first answer to the discovery ping over TCP
	udpGUID chan pva.GUID // the first one over UDP (pvAccessCPP), taken only without a TCP one
	// seq is the ping's sequence ID: random, and sent over TCP only, so an
	// answer echoing it (over TCP, or over UDP from the server's address)
	// comes from the server that read the ping.
	seq atomic.Uint32
	// replyPort is the UDP reply port the ping carried (set before the
	// ping is sent, read by the same goroutine).
	replyPort uint16
	tlsAns    chan tlsAnswer // reply to the TLS-endpoint query
	// overTLS: the connection is to the server's TLS endpoint (dialTLS),
	// its certificate checked against pvans's roots. Set before use.
	overTLS bool

	// dead is set (under mu, with the waiters flushed) when the connection
	// closes; the prober reads it under its own lock, hence atomic.
	// closeErr is why, written before dead is set and read only after it
	// was seen set.
	dead     atomic.Bool
	closeErr error

	// Guarded by Prober.mu: set once the connection is the server's watch
	// connection.
	established bool
}

func newClient(p *Prober, s *server) *client {
	return &client{p: p, s: s, log: p.log, waiters: make(map[waitKey]chan result), guid: make(chan pva.GUID, 1), udpGUID: make(chan pva.GUID, 1), tlsAns: make(chan tlsAnswer, 1),
		// A listing reply's type is a few descriptors; a server may not
		// make pvans keep more (a bound: docs/SECURITY.md, "Bounds").
		tc: pva.TypeCache{MaxEntries: probeMaxCachedTypes, MaxBytes: probeMaxCachedTypeBytes}}
}

// id is the connection's next CID or IOID: counted up from 1 and, past
// 2³¹−1, from 1 again, never negative as a signed int: Phoebus core-pva's
// server reads IDs as Java ints (a negative searched CID is its "list
// servers" ping). A watch connection lives for months of re-listings.
func (cl *client) id() uint32 {
	cl.nextID++
	if cl.nextID > math.MaxInt32 {
		cl.nextID = 1
	}
	return cl.nextID
}

// Message implements pvaconn.Handler.
func (cl *client) Message(c *pvaconn.Conn, h pva.Header, payload []byte) {
	switch h.Command {
	case pva.CmdCreateChannel:
		var m pva.CreateChannelReply
		err := m.Decode(payload, h.BigEndian())
		cl.deliver(waitKey{waitCreate, m.CID}, result{status: m.Status, sid: m.SID, err: err})
	case pva.CmdRPC:
		var m pva.RPCReply
		err := m.Decode(payload, h.BigEndian(), &cl.tc)
		cl.deliver(waitKey{waitRPC, m.IOID}, result{status: m.Status, subcmd: m.Subcmd, value: m.Value, err: err})
	case pva.CmdSearchResponse:
		var m pva.SearchResponse
		if m.Decode(payload, h.BigEndian()) != nil {
			return
		}
		switch {
		case m.Seq == tlsSeq:
			select {
			case cl.tlsAns <- tlsAnswer{guid: m.GUID, port: m.Port, tls: string(m.Protocol) == "tls"}:
			default:
			}
		case m.Seq == cl.seq.Load() && m.Seq != 0:
			cl.answered(m.GUID)
		}
	case pva.CmdEcho:
		if cid, ok := echoMarked(payload); ok {
			cl.deliver(waitKey{waitEcho, cid}, result{})
		}
	case pva.CmdDestroyChannel:
		// The server killed our channel; the next listing creates it again.
		cl.mu.Lock()
		cl.haveSID = false
		cl.mu.Unlock()
	case pva.CmdMessage:
		var m pva.Message
		if m.Decode(payload, h.BigEndian()) == nil {
			cl.log.Debug("server message", zap.Stringer("endpoint", cl.s.ep),
				zap.Uint8("level", m.Level), zap.String("text", m.Text))
		}
	}
}

// Closed implements pvaconn.Closer.
func (cl *client) Closed(c *pvaconn.Conn, err error) {
	cl.mu.Lock()
	cl.closeErr = err
	cl.dead.Store(true)
	ws := cl.waiters
	cl.waiters = map[waitKey]chan result{}
	cl.mu.Unlock()
	for _, ch := range ws {
		ch <- result{err: errConnLost}
	}
	if h := cl.p.onClosed; h != nil {
		h(cl)
	}
	cl.p.connClosed(cl, err)
}

func (cl *client) deliver(k waitKey, r result) {
	cl.mu.Lock()
	ch := cl.waiters[k]
	delete(cl.waiters, k)
	cl.mu.Unlock()
	if ch != nil {
		ch <- r // buffered, one result per waiter
	}
}

// send registers a waiter for k (if wait) and sends msg.
func (cl *client) send(k waitKey, wait bool, msg []byte) (chan result, error) {
	var ch chan result
	cl.mu.Lock()
	if cl.dead.Load() {
		cl.mu.Unlock()
		return nil, errConnLost
	}
	if wait {
		ch = make(chan result, 1)
		cl.waiters[k] = ch
	}
	conn := cl.conn
	cl.mu.Unlock()
	if err := conn.Send(msg); err != nil {
		cl.forget(k)
		return nil, err
	}
	return ch, nil
}

func (cl *client) forget(k waitKey) {
	cl.mu.Lock()
	delete(cl.waiters, k)
	cl.mu.Unlock()
}

func (cl *client) wait(ctx context.Context, k waitKey, ch chan result) (result, error) {
	select {
	case r := <-ch:
		return r, r.err
	case <-ctx.Done():
		cl.forget(k)
		return result{}, ctx.Err()
	}
}

// ping sends a discovery ping over TCP with sequence ID seq; a PVXS server
// answers it over TCP with its GUID (found=0), a pvAccessCPP server over
// UDP to the reply port it carries (port: the daemon's client socket, 0 for
// none) at the address the ping came from. That answer, not a beacon, is
// the server's identity.
var pingProtocols = [][]byte{[]byte("tcp")}

func (cl *client) ping(seq uint32, port uint16) {
	cl.seq.Store(seq)
	cl.replyPort = port
	// "tcp" is listed because PVXS's tls branch answers no TCP search that
	// lists neither "tcp" nor "tls" (serverchan.cpp handle_SEARCH); master
	// and pvAccessCPP answer either way.
	msg := pva.AppendSearch(nil, cl.conn.Flags(), &pva.Search{Seq: seq, Flags: pva.SearchMustReply | pva.SearchUnicast, ReplyPort: port, Protocols: pingProtocols})
	cl.send(waitKey{}, false, msg)
}

// searchName asks the server, on the ping's sequence ID, for name, one it
// has just listed: a server that answers no empty search (the ping)
// answers this one with its GUID, which proves who it is as the ping's
// answer would (the ID is random, and sent over TCP only). Not
// MustReply: only a server that has the name answers.
func (cl *client) searchName(name string) {
	msg := pva.AppendSearch(nil, cl.conn.Flags(), &pva.Search{Seq: cl.seq.Load(), Flags: pva.SearchUnicast, ReplyPort: cl.replyPort,
		Protocols: pingProtocols, Names: []pva.SearchName{{CID: 1, Name: []byte(name)}}})
	cl.send(waitKey{}, false, msg)
}

// pingJava asks again for the GUID, the way Phoebus core-pva's server
// answers over TCP: it ignores a TCP search without names (the ping), but
// answers a name searched with a negative CID with its GUID and the
// search's sequence ID, found = 0 (PVAServer.handleSearchRequest, "list
// servers"). Sent only to a server that showed it has no `server` PV
// (PVXS and pvAccessCPP have one), under the ping's random sequence ID, so
// the answer proves the GUID as the ping's would (pingGUID).
func (cl *client) pingJava() {
	seq := cl.seq.Load()
	if seq == 0 {
		return
	}
	msg := pva.AppendSearch(nil, cl.conn.Flags(), &pva.Search{Seq: seq, Flags: pva.SearchUnicast, Protocols: pingProtocols,
		Names: []pva.SearchName{{CID: javaListServers, Name: []byte(ServerPV)}}})
	cl.send(waitKey{}, false, msg)
}

// javaListServers is the CID of pingJava's search: -1 as a Java int, as
// the Java server's own "list servers" replies carry.
const javaListServers = 0xFFFFFFFF

// answered takes the first answer to the ping.
func (cl *client) answered(g pva.GUID) {
	select {
	case cl.guid <- g:
	default:
	}
}

// answeredOverUDP takes the first answer to the ping heard over UDP.
func (cl *client) answeredOverUDP(g pva.GUID) {
	select {
	case cl.udpGUID <- g:
	default:
	}
}

// pingGUID is the endpoint's answer to the ping. A TCP answer decides
// whatever came over UDP: a datagram can be forged from the server's
// address, the TCP connection cannot. A server that answers over TCP does
// so before it answers the listing on the same connection (PVXS handles a
// connection's messages in order), so once the listing is done a missing
// TCP answer means the server answers over UDP or not at all; the UDP
// answer is taken then, or the first of either within wait.
func (cl *client) pingGUID(ctx context.Context, wait time.Duration) pva.GUID {
	select {
	case g := <-cl.guid:
		return g
	default:
	}
	select {
	case g := <-cl.udpGUID:
		return g
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case g := <-cl.guid:
		return g
	case g := <-cl.udpGUID:
		return g
	case <-t.C:
	case <-ctx.Done():
	}
	return pva.GUID{}
}

// channel returns the SID of the `server` channel, creating it once per
// connection: the channel stays open for re-listing.
func (cl *client) channel(ctx context.Context) (uint32, error) {
	cl.mu.Lock()
	if cl.haveSID {
		sid := cl.sid
		cl.mu.Unlock()
		return sid, nil
	}
	cid := cl.id()
	flags := cl.conn.Flags()
	cl.mu.Unlock()
	k := waitKey{waitCreate, cid}
	ch, err := cl.send(k, true, pva.AppendCreateChannel(nil, flags,
		&pva.CreateChannel{Channels: []pva.ChannelRequest{{CID: cid, Name: ServerPV}}}))
	if err != nil {
		return 0, err
	}
	ek := waitKey{waitEcho, cid}
	echoed, err := cl.send(ek, true, pva.AppendEcho(nil, flags, appendEchoMark(nil, cid)))
	if err != nil {
		cl.forget(k)
		return 0, err
	}
	defer cl.forget(ek)
	r, err := cl.waitCreated(ctx, k, ch, echoed)
	switch {
	case err == errConnLost || ctx.Err() != nil:
		return 0, err
	case err != nil:
		if errors.Is(err, errNoServerPV) {
			cl.pingJava()
		}
		return 0, &ListError{Step: "create channel", Err: err}
	case !r.status.OK() || r.sid == pva.RefusedSID:
		return 0, &ListError{Step: "create channel", Status: r.status}
	}
	cl.mu.Lock()
	cl.sid, cl.haveSID = r.sid, true
	cl.mu.Unlock()
	return r.sid, nil
}

// waitCreated waits for the CREATE_CHANNEL's answer: until ctx ends, or
// ServerPVGrace (the prober's clock) after the server answered the echo
// sent after it (errNoServerPV).
func (cl *client) waitCreated(ctx context.Context, k waitKey, ch, echoed chan result) (result, error) {
	var grace <-chan struct{}
	for {
		select {
		case r := <-ch:
			return r, r.err
		case e := <-echoed:
			if e.err != nil {
				return e, e.err
			}
			select {
			case r := <-ch: // both came: the one read first decides nothing
				return r, r.err
			default:
			}
			fired := make(chan struct{})
			t := cl.p.opt.Clock.AfterFunc(ServerPVGrace, func() { close(fired) })
			defer t.Stop()
			grace, echoed = fired, nil
		case <-grace:
			cl.forget(k)
			return result{}, errNoServerPV
		case <-ctx.Done():
			cl.forget(k)
			return result{}, ctx.Err()
		}
	}
}

// pvRequest is PVXS's default RPC pvRequest, struct{ field: struct{} }.
var pvRequest = pva.NewValue(pva.Struct("", pva.M("field", pva.Struct(""))))

// rpc runs one `server` RPC (INIT, EXEC with an NTURI query.op, then
// DESTROY_REQUEST) as pvxlist does, and returns the result value.
func (cl *client) rpc(ctx context.Context, sid uint32, op string) (*pva.Value, error) {
	cl.mu.Lock()
	ioid := cl.id()
	flags := cl.conn.Flags()
	cl.mu.Unlock()
	k := waitKey{waitRPC, ioid}
	defer cl.send(k, false, pva.AppendRequestRef(nil, flags, pva.CmdDestroyRequest, &pva.RequestRef{SID: sid, IOID: ioid}))

	ch, err := cl.send(k, true, pva.AppendRPCRequest(nil, flags,
		&pva.RPCRequest{SID: sid, IOID: ioid, Subcmd: pva.SubcmdInit, Value: pvRequest}))
	if err != nil {
		return nil, err
	}
	r, err := cl.wait(ctx, k, ch)
	if err := opError("rpc init", ctx, r, err); err != nil {
		return nil, err
	}
	ch, err = cl.send(k, true, pva.AppendRPCRequest(nil, flags,
		&pva.RPCRequest{SID: sid, IOID: ioid, Subcmd: pva.SubcmdExec, Value: pva.NewNTURI(ServerPV, op)}))
	if err != nil {
		return nil, err
	}
	r, err = cl.wait(ctx, k, ch)
	if err := opError("rpc exec", ctx, r, err); err != nil {
		return nil, err
	}
	if r.subcmd&(pva.SubcmdInit|pva.SubcmdGet) != 0 {
		return nil, &ListError{Step: "rpc exec", Err: fmt.Errorf("reply sub-command 0x%02x", r.subcmd)}
	}
	return r.value, nil
}

func opError(step string, ctx context.Context, r result, err error) error {
	switch {
	case err == errConnLost || ctx.Err() != nil:
		return err
	case err != nil:
		return &ListError{Step: step, Err: err} // undecodable reply
	case !r.status.OK():
		return &ListError{Step: step, Status: r.status}
	}
	return nil
}

// tlsAnswer is a server's reply to the TLS-endpoint query.
type tlsAnswer struct {
	guid pva.GUID
	port uint16
	tls  bool
}

// askTLS sends the TLS-endpoint query: a MustReply search offering
// ["tls","tcp"], the list a PVXS client with a keychain sends. A PVXS
// server with TLS answers it with protocol "tls" and its TLS port, any
// other with "tcp" (serverchan.cpp handle_SEARCH; over TCP "tls" counts
// only before "tcp"). Beacons name only the plain port, so asking is the
// only way to learn the TLS one.
func (cl *client) askTLS() {
	select {
	case <-cl.tlsAns: // a stale answer from an earlier listing
	default:
	}
	msg := pva.AppendSearch(nil, cl.conn.Flags(), &pva.Search{Seq: tlsSeq, Flags: pva.SearchMustReply | pva.SearchUnicast,
		Protocols: [][]byte{[]byte("tls"), []byte("tcp")}})
	cl.send(waitKey{}, false, msg)
}

// tlsEndpoint is what the query learned, once the listing that followed
// it has been answered: a server answers searches in order, before the
// RPCs sent after them, so no answer by then is no answer (pvAccessCPP
// does not answer searches over TCP). The address is always the
// endpoint's own: only the port is the server's to name.
func (cl *client) tlsEndpoint() (netip.AddrPort, pva.GUID) {
	select {
	case a := <-cl.tlsAns:
		if a.tls && a.port != 0 {
			return netip.AddrPortFrom(cl.s.ep.Addr(), a.port), a.guid
		}
	default:
	}
	return netip.AddrPort{}, pva.GUID{}
}

// dialTLS connects to s's TLS endpoint ep with the prober's TLS
// configuration (pvans's certificate as the client's when it has one; the
// server's must chain to pvans's roots, no host name checked, as PVXS
// does) and asks the TLS-endpoint query there: the answer must come from
// guid, the server proven over the plain endpoint, or the connection is
// refused (another process holds the TLS port). It returns a client on
// that connection, not yet anyone's watch, and the certificate's
// identity.
func (p *Prober) dialTLS(ctx context.Context, s *server, ep netip.AddrPort, guid pva.GUID) (*client, string, error) {
	cl := newClient(p, s)
	cl.overTLS = true
	opt := p.tm.Load().conn
	opt.TLS = p.opt.TLS
	conn, err := p.opt.Dial(ctx, ep, opt, cl)
	if err != nil {
		return nil, "", err
	}
	cl.mu.Lock()
	cl.conn = conn
	cl.mu.Unlock()
	fail := func(err error) (*client, string, error) {
		conn.Close()
		return nil, "", err
	}
	chain := conn.PeerCertificates()
	if len(chain) == 0 {
		return fail(errors.New("no TLS on the TLS endpoint"))
	}
	cl.askTLS()
	select {
	case a := <-cl.tlsAns:
		if a.guid != guid {
			return fail(fmt.Errorf("the TLS endpoint answers as %s, the listed server is %s", a.guid, guid))
		}
	case <-conn.Done():
		return fail(errConnLost)
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	return cl, keychain.Identity(chain[0]), nil
}

// list runs op=channels and op=info concurrently on the `server` channel,
// after the TLS-endpoint query (Info.TLS). A failed info is kept in
// Info.Err; it does not fail the listing. On a TLS connection the
// identity is its certificate's; on a plain one that learned a TLS
// endpoint (with Options.TLS) the endpoint is proven on a TLS connection
// of its own (dialTLS), returned as upgrade: the caller makes it the
// watch (and the next listings run on it) or closes it.
func (cl *client) list(ctx context.Context) (names []string, info Info, upgrade *client, err error) {
	cl.askTLS()
	sid, err := cl.channel(ctx)
	if err != nil {
		return nil, Info{}, nil, err
	}
	infoc := make(chan Info, 1)
	go func() {
		v, err := cl.rpc(ctx, sid, pva.OpInfo)
		if err != nil {
			infoc <- Info{Err: err.Error()}
			return
		}
		infoc <- infoFromValue(v)
	}()
	v, err := cl.rpc(ctx, sid, pva.OpChannels)
	info = <-infoc
	if err != nil {
		return nil, info, nil, err
	}
	names, err = pva.ChannelListNames(v)
	if err != nil {
		return nil, info, nil, &ListError{Step: "decode", Err: err}
	}
	var guid pva.GUID
	info.TLS, guid = cl.tlsEndpoint()
	switch {
	case cl.overTLS:
		// Its GUID was checked when it was made.
		if !info.TLS.IsValid() {
			info.TLS = netip.AddrPortFrom(cl.s.ep.Addr(), cl.conn.Remote().Port())
		}
		if chain := cl.conn.PeerCertificates(); len(chain) > 0 {
			info.Identity = keychain.Identity(chain[0])
		}
	case info.TLS.IsValid() && cl.p.opt.TLS != nil:
		var perr error
		upgrade, info.Identity, perr = cl.p.dialTLS(ctx, cl.s, info.TLS, guid)
		if perr != nil {
			// The listing stands; the server is just not TLS-proven.
			info.TLSErr = perr.Error()
			cl.log.Debug("TLS endpoint not proven", zap.Stringer("endpoint", cl.s.ep), zap.Stringer("tls", info.TLS), zap.Error(perr))
		}
	}
	return names, info, upgrade, nil
}

// Info is a server's answer to op=info, kept for operators. PVXS sends
// implLang and version; pvAccessCPP adds process, startTime and host.
type Info struct {
	ImplLang string
	Version  string
	Fields   map[string]string // every scalar member, formatted
	Err      string            // why op=info failed, if it did
	// File is set for names read from a static name file (no probe).
	File string
	// Took is how long the listing took (connect to names), for the log.
	Took time.Duration
	// TLS is the server's TLS endpoint, learned by the listing's
	// TLS-endpoint query; zero if it has none.
	TLS netip.AddrPort
	// Identity is the TLS endpoint's certificate (keychain.Identity) when
	// the listing proved it (Options.TLS); TLSErr says why not.
	Identity, TLSErr string
}

func infoFromValue(v *pva.Value) Info {
	var in Info
	if v == nil || v.Type == nil || v.Type.Code != pva.TypeStruct {
		in.Err = "op=info: no structure in reply"
		return in
	}
	in.Fields = make(map[string]string, len(v.Fields))
	for i, m := range v.Type.Members {
		if i >= len(v.Fields) {
			break
		}
		f := v.Fields[i]
		var s string
		switch c := m.Type.Code; {
		case c == pva.TypeString:
			s = f.Str
		case c == pva.TypeFloat32 || c == pva.TypeFloat64:
			s = strconv.FormatFloat(f.Float, 'g', -1, 64)
		case c >= pva.TypeUInt8 && c <= pva.TypeUInt64:
			s = strconv.FormatUint(f.Uint, 10)
		case c.IsScalar():
			s = strconv.FormatInt(f.Int, 10)
		default:
			continue
		}
		in.Fields[m.Name] = s
	}
	in.ImplLang = in.Fields["implLang"]
	in.Version = in.Fields["version"]
	return in
}
