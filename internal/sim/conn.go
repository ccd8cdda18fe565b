package sim

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
)

// The simulator frames its own TCP connections rather than using pvaconn:
// it must be able to go silent mid-connection (read and drop, answer
// nothing, not even ECHO), which a general connection type should not
// offer. Everything it sends is little endian with the server flag, as a
// PVXS server on x86 does.

const (
	srvFlags       = pva.FlagServer // little endian, server direction
	maxMessage     = 16 << 20       // larger payloads: protocol fault, close
	flushThreshold = 64 << 10
	serverPV       = "server"
	refusedSID     = 0xFFFFFFFF
)

type channel struct {
	cid    uint32
	name   string
	server bool // the `server` PV
	value  float64
}

type conn struct {
	in     *instance
	nc     net.Conn
	br     *bufio.Reader
	out    []byte
	chans  map[uint32]*channel
	sid    uint32
	types  pva.TypeCache // client→server descriptor cache
	search pva.Search
	cids   []uint32
	seg    []byte // segments being reassembled
	segCmd pva.Command
	inSeg  bool
}

func serveConn(in *instance, nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if in.silent.Load() {
		_, _ = io.Copy(io.Discard, nc) // a silent server accepts and says nothing
		return
	}
	c := &conn{in: in, nc: nc, br: bufio.NewReaderSize(nc, 64<<10), chans: map[uint32]*channel{}, sid: 0x01030507}
	c.out = pva.AppendSetByteOrder(c.out, srvFlags)
	c.out = pva.AppendServerValidation(c.out, srvFlags, &pva.ServerValidation{
		BufferSize: pva.DefaultBufferSize, RegistrySize: pva.DefaultRegistrySize,
		AuthMethods: []string{"anonymous", "ca"},
	})
	if !c.flush() {
		return
	}
	var hdr [pva.HeaderSize]byte
	var payload []byte
	for {
		if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
			return
		}
		h, err := pva.DecodeHeader(hdr[:])
		if err != nil || h.FromServer() {
			return // PVXS: protocol decode fault, disconnect
		}
		if h.Control() {
			continue
		}
		if h.Size > maxMessage {
			return
		}
		if cap(payload) < int(h.Size) {
			payload = make([]byte, h.Size)
		}
		payload = payload[:h.Size]
		if _, err := io.ReadFull(c.br, payload); err != nil {
			return
		}
		if in.silent.Load() {
			continue // killed: read and drop, so the peer sees an open, mute socket
		}
		msg, ok := c.reassemble(h, payload)
		if !ok {
			return
		}
		if msg == nil {
			continue
		}
		if !c.dispatch(h, msg) {
			return
		}
		if !c.completeBuffered() || len(c.out) > flushThreshold {
			if !c.flush() {
				return
			}
		}
	}
}

// reassemble joins segmented messages (PVXS never segments, pvAccessCPP
// may). It returns the whole payload when one is complete, nil while
// segments are pending, and false on a segmentation violation.
func (c *conn) reassemble(h pva.Header, payload []byte) ([]byte, bool) {
	switch h.Segment() {
	case 0:
		if c.inSeg {
			return nil, false
		}
		return payload, true
	case pva.FlagSegFirst:
		if c.inSeg {
			return nil, false
		}
		c.inSeg, c.segCmd, c.seg = true, h.Command, append(c.seg[:0], payload...)
		return nil, true
	default:
		if !c.inSeg || h.Command != c.segCmd || len(c.seg)+len(payload) > maxMessage {
			return nil, false
		}
		c.seg = append(c.seg, payload...)
		if h.Segment() == pva.FlagSegLast {
			c.inSeg = false
			return c.seg, true
		}
		return nil, true
	}
}

// completeBuffered reports whether a whole message is already buffered,
// so replies to pipelined requests can go out in one write.
func (c *conn) completeBuffered() bool {
	n := c.br.Buffered()
	if n < pva.HeaderSize {
		return false
	}
	b, _ := c.br.Peek(pva.HeaderSize)
	h, err := pva.DecodeHeader(b)
	if err != nil {
		return false
	}
	return uint64(h.PayloadLen()) <= uint64(n-pva.HeaderSize)
}

func (c *conn) flush() bool {
	if len(c.out) == 0 {
		return true
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := c.nc.Write(c.out)
	c.out = c.out[:0]
	return err == nil
}

// begin starts a little-endian server message; end patches its size.
func (c *conn) begin(cmd pva.Command) (pva.Writer, int) {
	start := len(c.out)
	w := pva.Writer{B: pva.AppendHeader(c.out, pva.Header{Flags: srvFlags, Command: cmd})}
	return w, start
}

func (c *conn) end(w pva.Writer, start int) {
	binary.LittleEndian.PutUint32(w.B[start+4:], uint32(len(w.B)-start-pva.HeaderSize))
	c.out = w.B
}

// dispatch handles one message; false closes the connection.
func (c *conn) dispatch(h pva.Header, p []byte) bool {
	be := h.BigEndian()
	switch h.Command {
	case pva.CmdConnectionValidation:
		var v pva.ClientValidation
		st := pva.Status{}
		if err := v.Decode(p, be); err != nil {
			return false
		}
		if v.AuthMethod != "ca" && v.AuthMethod != "anonymous" {
			st = pva.Status{Type: pva.StatusError, Message: "Client selects unadvertised auth"}
		}
		c.out = pva.AppendConnectionValidated(c.out, srvFlags, st)
	case pva.CmdEcho:
		c.out = pva.AppendEcho(c.out, srvFlags, p)
	case pva.CmdSearch:
		return c.onSearch(p, be)
	case pva.CmdCreateChannel:
		return c.onCreate(p, be)
	case pva.CmdDestroyChannel:
		r := pva.NewReader(p, be, "CMD_DESTROY_CHANNEL")
		sid, cid := r.U32("sid"), r.U32("cid")
		if r.Failed() {
			return false
		}
		if _, ok := c.chans[sid]; ok {
			delete(c.chans, sid)
			w, start := c.begin(pva.CmdDestroyChannel)
			w.U32(sid)
			w.U32(cid)
			c.end(w, start)
		}
	case pva.CmdGet:
		return c.onGet(p, be)
	case pva.CmdRPC:
		return c.onRPC(p, be)
	}
	// DESTROY_REQUEST, CANCEL_REQUEST: no reply; operations keep no state.
	// Anything else is drained and ignored, as PVXS does.
	return true
}

func (c *conn) onSearch(p []byte, be bool) bool {
	s := &c.search
	if err := s.Decode(p, be); err != nil {
		return false // PVXS: malformed search over TCP → disconnect
	}
	// The TCP path ignores the protocol list (wire-notes §9).
	c.cids = c.in.claim(s.Names, c.cids[:0])
	if len(c.cids) == 0 && !s.MustReply() {
		return true
	}
	c.out = pva.AppendSearchResponse(c.out, srvFlags, &pva.SearchResponse{
		GUID: c.in.guid, Seq: s.Seq, Addr: pva.AnyIPv4, Port: c.in.tcpPort,
		Protocol: protoTCP, Found: len(c.cids) > 0, CIDs: c.cids,
	})
	return true
}

func (c *conn) onCreate(p []byte, be bool) bool {
	r := pva.NewReader(p, be, "CMD_CREATE_CHANNEL")
	n := int(r.U16("count"))
	for i := 0; i < n && !r.Failed(); i++ {
		cid := r.U32("cid")
		name := r.String("name")
		if r.Failed() {
			break
		}
		w, start := c.begin(pva.CmdCreateChannel)
		w.U32(cid)
		ch := c.lookup(name)
		if ch == nil {
			w.U32(refusedSID)
			w.Status(pva.Status{Type: pva.StatusFatal, Message: "Refused to create Channel", Stack: "pvx:serv:refusechan:"})
		} else {
			ch.cid = cid
			sid := c.sid
			c.sid++
			c.chans[sid] = ch
			w.U32(sid)
			w.Status(pva.Status{})
		}
		c.end(w, start)
	}
	return !r.Failed()
}

// lookup returns a new channel for name if this server serves it.
func (c *conn) lookup(name string) *channel {
	if name == serverPV {
		return &channel{name: name, server: true}
	}
	j, ok := c.in.srv.names.Load().index[name]
	if !ok {
		return nil
	}
	return &channel{name: name, value: float64(c.in.srv.index*100000 + j)}
}

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

var ntScalarDouble = pva.NTScalarDoubleType()

func (c *conn) onGet(p []byte, be bool) bool {
	var req pva.GetRequest
	if err := req.Decode(p, be, &c.types); err != nil {
		return false
	}
	ch, ok := c.chans[req.SID]
	if !ok {
		return true
	}
	reply := pva.GetReply{IOID: req.IOID, Subcmd: req.Subcmd}
	switch {
	case ch.server:
		reply.Status = pva.Status{Type: pva.StatusError, Message: "GET not supported"}
	case req.IsInit():
		reply.Type = ntScalarDouble
	default:
		v := pva.NewNTScalarDouble(ch.value)
		now := time.Now()
		v.Field("timeStamp.secondsPastEpoch").Int = now.Unix()
		v.Field("timeStamp.nanoseconds").Int = int64(now.Nanosecond())
		reply.Value, reply.Changed = v, getChanged
	}
	c.out = pva.AppendGetReply(c.out, srvFlags, &reply)
	return true
}

// onRPC serves the `server` PV as PVXS's ServerSource does (wire-notes §6.3).
func (c *conn) onRPC(p []byte, be bool) bool {
	var req pva.RPCRequest
	// The INIT pvRequest is decoded too: it keeps the type cache in step
	// (pvlist defines cache keys in it).
	if err := req.Decode(p, be, &c.types); err != nil {
		return false
	}
	ch, ok := c.chans[req.SID]
	if !ok {
		return true
	}
	// The reply echoes the request's sub-command, 0x10 included (capture #61).
	reply := pva.RPCReply{IOID: req.IOID, Subcmd: req.Subcmd}
	switch {
	case !ch.server:
		reply.Status = pva.Status{Type: pva.StatusError, Message: "RPC not supported"}
	case req.IsInit():
	default:
		_, op, err := pva.NTURIOp(req.Value)
		switch {
		case err != nil:
			reply.Status = pva.Status{Type: pva.StatusError, Message: "Missing required .query.op"}
		case op == pva.OpChannels:
			reply.Value = pva.NewChannelList(c.in.srv.names.Load().sorted)
		case op == pva.OpInfo:
			reply.Value = pva.NewServerInfo("cpp", c.in.srv.site.opts.Version)
		default:
			reply.Status = pva.Status{Type: pva.StatusError, Message: "Not implemented"}
		}
	}
	c.out = pva.AppendRPCReply(c.out, srvFlags, &reply)
	return true
}
