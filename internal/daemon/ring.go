package daemon

import (
	"errors"
	"net/netip"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/searchring"
	"github.com/pvans-project/pvans/internal/upstream"
)

// The search ring's links to the rest of the daemon that PVXS keeps inside
// its client: hurry-up on an operator's request (Context::hurryUp),
// re-entry when a claim proves broken (docs/protocol.md, "Re-entry into
// search"), and the datagrams' way out.

// operatorDiscover is POST /v1/discover: a discovery ping, and a hurry-up
// of the search ring as Context::hurryUp() does — refused, like every poke,
// within 30 s of the last accepted one (the ping is sent regardless).
func (d *Daemon) operatorDiscover() error {
	err := d.discover(discoverOperator)
	d.Ring.Poke(searchring.PokeOperator)
	return err
}

// serverGone is told that a registered server proved dead (its watch
// connection ended, or its beacons stopped): names the ring resolved to it
// and pushed to clients are searched again at the next tick, as a channel
// lost while active is (docs/protocol.md, "Re-entry into search"), so the
// clients, which search again themselves when the endpoint fails them, are
// answered as soon as another server claims the name.
func (d *Daemon) serverGone(guid pva.GUID) {
	if n := d.Ring.ReenterServer(guid, searchring.ReenterLost); n > 0 {
		d.log.Info("names resolved to a lost server searched again", zap.Stringer("guid", guid), zap.Int("names", n))
	}
}

// askUnlistable puts to a server that answered the probe but refused the
// listing (err is a *probe.ListError) the names clients are waiting for
// that it has claimed before (the ring resolved them to that endpoint):
// it answers for its own names over TCP at once, where the ring would
// reach them within a fast revolution (6 s) after the server's beacon
// hurried it up, or a full one (30 s) otherwise. A server that never
// claimed a name is told nothing: one beacon must not get a host the
// whole waiting set. The answers go through the ring like any other
// (correlated by CID), and may name only the asked server (onAskReply).
func (d *Daemon) askUnlistable(ep netip.AddrPort, err error) {
	var le *probe.ListError
	if !errors.As(err, &le) {
		return // not reachable: nothing to ask
	}
	seq, names, namesTLS := d.Ring.SearchingAt(ep)
	if len(names)+len(namesTLS) == 0 {
		return
	}
	// A pvAccessCPP server answers over UDP, from its own address, for
	// the endpoint asked.
	d.UDP.Expect(ep, upstream.AskWait)
	if !d.Upstream.Ask(ep, seq, names, namesTLS, d.UDP.ClientAddr().Port()) {
		d.log.Debug("unlistable server not asked: too many asks running", zap.Stringer("endpoint", ep))
	}
}

// onAskReply takes an asked server's TCP answer: it may name only itself,
// unless it is a trusted relay (access.trusted_relays), which may speak
// for other hosts as over UDP: never for this host, loopback, link-local,
// broadcast or multicast addresses (udpsearch's relay rule).
func (d *Daemon) onAskReply(from netip.AddrPort, m *pva.SearchResponse) {
	via := searchring.ViaServer
	for _, p := range d.conf().Access.TrustedRelays {
		if p.Contains(from.Addr().Unmap()) && (m.Addr.IsAny() || d.UDP.Relayable(m.Addr.Addr())) {
			via = searchring.ViaNameServer
			break
		}
	}
	d.Ring.OnReply(from, via, m)
}

// ringTransport sends the ring's datagrams from the client socket and to
// the upstream name servers.
type ringTransport struct{ d *Daemon }

func (t ringTransport) SendUDP(datagram []byte, sent func(netip.AddrPort, error)) {
	_ = t.d.UDP.SendSearch(datagram, sent)
}

func (t ringTransport) Upstreams() []searchring.Upstream {
	cs := t.d.Upstream.Conns()
	out := make([]searchring.Upstream, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out
}

// ringSearcher hands the resolver's searches to the ring with the
// protocols their waiters listed: a name TLS clients wait for is searched
// with ["tls","tcp"], so a Secure PVAccess server's answer names its TLS
// endpoint; one plain clients wait for with ["tcp"].
type ringSearcher struct{ r *searchring.Ring }

func (s ringSearcher) Want(name string, tls bool) {
	if tls {
		s.r.WantTLS(name)
	} else {
		s.r.Want(name)
	}
}

func (s ringSearcher) Drop(name string, tls bool) {
	if tls {
		s.r.DropTLS(name)
	} else {
		s.r.Drop(name)
	}
}

// onSearchResolvedTLS takes a search-through answer to TLS clients'
// search. A "tcp" answer (a server without TLS) goes the plain way, to
// the TLS clients only. A "tls" answer names the server's TLS endpoint:
// the clients waiting with TLS are answered with it and protocol "tls",
// nobody else. It cannot be listed there (a listing is plain PVA); a
// server the registry knows under that GUID at that address is listed
// again at its plain endpoint, which learns its TLS endpoint too, and any
// other is listed once its beacons name its plain endpoint.
func (d *Daemon) onSearchResolvedTLS(name string, guid pva.GUID, ep netip.AddrPort, overTLS bool) {
	if !overTLS {
		d.onSearchResolved(name, true, guid, ep)
		return
	}
	if !d.conf().Access.ServerAllowed(ep.Addr()) {
		d.deniedServers.Add(1)
		return
	}
	d.Resolver.Answer(name, true, resolver.Endpoint{GUID: guid, Addr: ep, Protocol: "tls"})
	if sv, ok := d.Registry.Server(guid); ok && sv.Addr.Addr() == ep.Addr() {
		if h, ok := d.Registry.LookupName(name); !ok || h.GUID != guid {
			d.Prober.Probe(guid, sv.Addr, probe.ReasonSearchThrough)
		}
	}
}
