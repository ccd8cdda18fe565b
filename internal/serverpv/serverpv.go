// Package serverpv serves the `server` PV on pvans's TCP port, so `pvxlist
// <pvans host>` and `pvlist` work against pvans as against any PVA server
// (docs/protocol.md, "The listing RPC"): op=info says what pvans is;
// op=channels lists the PVs pvans itself serves, which is none. It
// deliberately does not list the names pvans resolves: another name server
// (or pvans) probing this one would then register those names with pvans's
// endpoint and send clients to a host that refuses to create them.
// Operators list those names with `pvans list --names` or the HTTP API.
package serverpv

import (
	"sync"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/limitlog"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
)

// Name is the PV every PVXS and pvAccessCPP server serves for listing.
const Name = "server"

// maxChannelsPerConn bounds the `server` channels one connection may hold.
const maxChannelsPerConn = 16

// Limits bound the descriptor caches clients fill (0xFD definitions in
// their RPC pvRequests). pvlist and pvxlist define a handful of small
// types; without a bound one connection could keep 65,536 types of up to
// 16,384 descriptors each (+2.8 GB from 115 MB sent, measured).
//
// The daemon passes the Default bounds below; a zero bound here is no
// bound.
type Limits struct {
	// Logger gets one line per 10 s while definitions are refused.
	Logger           *zap.Logger
	TypesPerConn     int // cached types per connection
	TypeBytesPerConn int // their expanded size per connection
	TypeBytesTotal   int // their expanded size over all connections
}

// The bounds the daemon passes (issue 40: constants, not settings):
// pvlist and pvxlist cache a handful of descriptors of a few hundred
// bytes, so these leave a real client room and an attacker 16 MiB.
const (
	DefaultTypesPerConn     = 64
	DefaultTypeBytesPerConn = 64 << 10
	DefaultTypeBytesTotal   = 16 << 20
)

// Stats are the provider's gauges (its counter is in metrics.go).
type Stats struct {
	CachedTypes     int   // types cached now, over all connections
	CachedTypeBytes int64 // their expanded size
}

// Provider implements tcpsearch.ChannelProvider.
type Provider struct {
	// Version is reported by op=info, e.g. "pvans 0.1.0".
	Version string
	lim     Limits

	mu       sync.Mutex
	conns    map[*pvaconn.Conn]*connState
	bytes    int64 // cached type bytes over all connections, under mu
	counters       // metrics.go
	ll       *limitlog.Log
}

type connState struct {
	nextSID uint32
	sids    map[uint32]uint32 // SID → CID
	types   pva.TypeCache     // the client's 0xFD/0xFE cache (pvlist uses it)
}

// New returns a provider; a zero limit is no bound.
func New(version string, l Limits) *Provider {
	return &Provider{Version: version, lim: l, conns: map[*pvaconn.Conn]*connState{}, ll: limitlog.New(l.Logger, 0, nil)}
}

// Stats returns the gauges now.
func (p *Provider) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{CachedTypeBytes: p.bytes}
	for _, st := range p.conns {
		s.CachedTypes += st.types.Len()
	}
	return s
}

func (p *Provider) state(c *pvaconn.Conn) *connState {
	st := p.conns[c]
	if st == nil {
		st = &connState{nextSID: 1, sids: map[uint32]uint32{}}
		st.types = pva.TypeCache{MaxEntries: p.lim.TypesPerConn, MaxBytes: p.lim.TypeBytesPerConn,
			// Called during Message, under p.mu.
			Admit: func(n int) bool {
				if p.lim.TypeBytesTotal > 0 && p.bytes+int64(n) > int64(p.lim.TypeBytesTotal) {
					return false
				}
				p.bytes += int64(n)
				return true
			}}
		p.conns[c] = st
	}
	return st
}

// Message handles CREATE_CHANNEL "server", its RPC and its destruction.
func (p *Provider) Message(c *pvaconn.Conn, h pva.Header, payload []byte) bool {
	be := h.BigEndian()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch h.Command {
	case pva.CmdCreateChannel:
		var m pva.CreateChannel
		if m.Decode(payload, be) != nil || len(m.Channels) != 1 || m.Channels[0].Name != Name {
			return false // tcpsearch refuses it
		}
		st := p.state(c)
		reply := pva.CreateChannelReply{CID: m.Channels[0].CID, SID: pva.RefusedSID,
			Status: pva.Status{Type: pva.StatusFatal, Message: "Refused to create Channel: too many"}}
		if len(st.sids) < maxChannelsPerConn {
			reply.SID, reply.Status = st.nextSID, pva.Status{}
			st.sids[st.nextSID] = m.Channels[0].CID
			st.nextSID++
		}
		_ = c.Send(pva.AppendCreateChannelReply(nil, c.Flags(), &reply))
		return true
	case pva.CmdDestroyChannel:
		var m pva.DestroyChannel
		st := p.conns[c]
		if st == nil || m.Decode(payload, be) != nil {
			return false
		}
		if _, ok := st.sids[m.SID]; !ok {
			return false
		}
		delete(st.sids, m.SID)
		_ = c.Send(pva.AppendDestroyChannel(nil, c.Flags(), &m))
		return true
	case pva.CmdRPC:
		st := p.conns[c]
		if st == nil {
			return false
		}
		var req pva.RPCRequest
		// Decode the INIT pvRequest too: it keeps the type cache in step.
		before := st.types.Refused()
		if req.Decode(payload, be, &st.types) != nil {
			if n := st.types.Refused() - before; n > 0 {
				p.refused.Add(uint64(n))
				p.ll.Hit("type_cache", "pvData type definition refused: the type cache bound is reached",
					zap.Stringer("client", c.Remote()), zap.Int("types_per_connection", p.lim.TypesPerConn),
					zap.Int("type_bytes_per_connection", p.lim.TypeBytesPerConn), zap.Int("type_bytes_total", p.lim.TypeBytesTotal))
			}
			return false
		}
		if _, ok := st.sids[req.SID]; !ok {
			return false
		}
		reply := pva.RPCReply{IOID: req.IOID, Subcmd: req.Subcmd}
		if !req.IsInit() {
			_, op, err := pva.NTURIOp(req.Value)
			switch {
			case err != nil:
				reply.Status = pva.Status{Type: pva.StatusError, Message: "Missing required .query.op"}
			case op == pva.OpChannels:
				reply.Value = pva.NewChannelList(nil)
			case op == pva.OpInfo:
				reply.Value = pva.NewServerInfo("go", p.Version)
			default:
				reply.Status = pva.Status{Type: pva.StatusError, Message: "Not implemented"}
			}
		}
		_ = c.Send(pva.AppendRPCReply(nil, c.Flags(), &reply))
		return true
	case pva.CmdDestroyRequest, pva.CmdCancelRequest:
		return p.conns[c] != nil
	}
	return false
}

// Closed forgets a connection and gives its cached types' share back.
func (p *Provider) Closed(c *pvaconn.Conn) {
	p.mu.Lock()
	if st := p.conns[c]; st != nil {
		p.bytes -= int64(st.types.Bytes())
		delete(p.conns, c)
	}
	p.mu.Unlock()
}
