// Package serverpv serves the `server` PV on pvans's TCP port, so `pvxlist
// <pvans host>` and `pvlist` work against pvans as against any PVA server
// (wire-notes §6): op=info says what pvans is; op=channels lists the PVs
// pvans itself serves, which is none. It deliberately does not list the
// names pvans resolves: another name server (or pvans) probing this one
// would then register those names with pvans's endpoint and send clients
// to a host that refuses to create them. Operators list those names with
// `pvans list --names` or the HTTP API.
package serverpv

import (
	"sync"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
)

// Name is the PV every PVXS and pvAccessCPP server serves for listing.
const Name = "server"

// maxChannelsPerConn bounds the `server` channels one connection may hold.
const maxChannelsPerConn = 16

// Provider implements tcpsearch.ChannelProvider.
type Provider struct {
	// Version is reported by op=info, e.g. "pvans 0.1.0".
	Version string

	mu    sync.Mutex
	conns map[*pvaconn.Conn]*connState
}

type connState struct {
	nextSID uint32
	sids    map[uint32]uint32 // SID → CID
	types   pva.TypeCache     // the client's 0xFD/0xFE cache (pvlist uses it)
}

// New returns a provider.
func New(version string) *Provider {
	return &Provider{Version: version, conns: map[*pvaconn.Conn]*connState{}}
}

func (p *Provider) state(c *pvaconn.Conn) *connState {
	st := p.conns[c]
	if st == nil {
		st = &connState{nextSID: 1, sids: map[uint32]uint32{}}
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
		if req.Decode(payload, be, &st.types) != nil {
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

// Closed forgets a connection.
func (p *Provider) Closed(c *pvaconn.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}
