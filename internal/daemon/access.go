package daemon

import (
	"net/netip"
	"strings"
	"unsafe"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/insight"
	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/udpsearch"
)

// This file turns config.Access into the hooks the parts take
// (resolver.Options.NameAllowed, tcpsearch/udpsearch ClientAllowed) and
// applies the server allow list to the paths that do not come through a
// beacon or a search-through answer (flows.go covers those): the loaded
// snapshot, static servers and static name files.

// nameFilter is the name policy for the resolver, or nil when no name
// rule is configured, so the hot path pays one nil check.
//
// A name is refused when a deny pattern matches it, or when allow patterns
// exist and none matches it. "rec.FIELD" is also refused when a deny
// pattern matches "rec": its answer would be rec's server, so denying a
// record denies its fields.
func nameFilter(a *config.Access) func(name []byte) bool {
	if len(a.NameAllow) == 0 && len(a.NameDeny) == 0 {
		return nil
	}
	return func(name []byte) bool {
		// A view, not a copy: the patterns read it only during the call,
		// and the check must not allocate per searched name.
		s := unsafe.String(unsafe.SliceData(name), len(name))
		if !a.NameAllowed(s) {
			return false
		}
		if i := strings.IndexByte(s, '.'); i > 0 {
			rec := s[:i]
			for j := range a.NameDeny {
				if a.NameDeny[j].Match(rec) {
					return false
				}
			}
		}
		return true
	}
}

// clientFilter is a client access check, or nil when both lists are empty.
func clientFilter(allow, deny []netip.Prefix, check func(netip.Addr) bool) func(netip.Addr) bool {
	if len(allow) == 0 && len(deny) == 0 {
		return nil
	}
	return check
}

// tcpClientFilter and udpClientFilter are the listeners' ClientAllowed.
func tcpClientFilter(a *config.Access) func(netip.Addr) bool {
	if len(a.TCPClientAllowCerts) > 0 {
		return a.TCPClientAllowed // an allow list of certificates only still refuses plain addresses
	}
	return clientFilter(a.TCPClientAllow, a.TCPClientDeny, a.TCPClientAllowed)
}

// tcpCertFilter is the TLS listener's ClientCertAllowed, or nil when the
// allow list names no certificate (TLS clients are then checked by
// address at accept, like the others).
func tcpCertFilter(a *config.Access) func(netip.Addr, string) bool {
	if len(a.TCPClientAllowCerts) == 0 {
		return nil
	}
	return a.TCPClientCertAllowed
}

func udpClientFilter(a *config.Access) func(netip.Addr) bool {
	return clientFilter(a.UDPClientAllow, a.UDPClientDeny, a.UDPClientAllowed)
}

// serverFilter is udpsearch's ServerAllowed (applied to a hint's sender
// and named server), or nil when the allow list is empty.
func serverFilter(a *config.Access) func(netip.Addr) bool {
	if len(a.ServerAllow) == 0 {
		return nil
	}
	return a.ServerAllowed
}

// withAnomalies makes every hint refused by the server allow list (a
// beacon or discovery reply from, or naming, a server outside it) a
// candidate beacon anomaly event (insight: at most once an hour per
// address).
func (d *Daemon) withAnomalies(p udpsearch.Policy) udpsearch.Policy {
	if allow := p.ServerAllowed; allow != nil {
		p.ServerAllowed = func(a netip.Addr) bool {
			if allow(a) {
				return true
			}
			d.anomaly(insight.AnomalyNotAllowed, pva.GUID{}, netip.AddrPortFrom(a, 0))(d.Insight.NotAllowed(a, d.clk.Now()))
			return false
		}
	}
	return p
}

// allowedStatic returns the static servers the server allow list admits,
// warning about the others (a configuration contradiction, not an attack).
func (d *Daemon) allowedStatic(eps []netip.AddrPort) []netip.AddrPort {
	var out []netip.AddrPort
	for _, ep := range eps {
		if d.conf().Access.ServerAllowed(ep.Addr()) {
			out = append(out, ep)
			continue
		}
		d.deniedServers.Add(1)
		d.log.Warn("static server outside access.server_allow: not probed", zap.Stringer("endpoint", ep))
	}
	return out
}

// dropDeniedServers removes the servers the server allow list a does not
// admit, and stops probing them: at start those a loaded snapshot holds
// (otherwise their names would be answered for the whole unverified
// window), on reload those a narrowed list no longer admits.
func (d *Daemon) dropDeniedServers(a *config.Access, why string) {
	if len(a.ServerAllow) == 0 {
		return
	}
	for _, s := range d.Registry.Servers() {
		if a.ServerAllowed(s.Addr.Addr()) {
			continue
		}
		d.deniedServers.Add(1)
		d.log.Info(why, zap.Stringer("guid", s.GUID), zap.Stringer("endpoint", s.Addr))
		d.Prober.Forget(s.Addr)
		_ = d.Registry.RemoveServer(s.GUID)
	}
	// Endpoints the prober knows with no registry row yet (being retried,
	// or named by a search-through answer) would be listed at their next
	// attempt: forget them too.
	for _, st := range d.Prober.Servers() {
		if !a.ServerAllowed(st.Endpoint.Addr()) {
			d.Prober.Forget(st.Endpoint)
		}
	}
}

// serverAccessSink applies the server allow list to static name files,
// whose endpoints reach the registry without a beacon.
type serverAccessSink struct{ probeSink }

func (s serverAccessSink) Listed(guid pva.GUID, ep netip.AddrPort, names []string, info probe.Info) {
	d := s.d
	if !d.conf().Access.ServerAllowed(ep.Addr()) {
		d.deniedServers.Add(1)
		if ce := d.log.Check(zap.DebugLevel, "static names for a server outside access.server_allow: ignored"); ce != nil {
			ce.Write(zap.Stringer("endpoint", ep), zap.String("file", info.File))
		}
		return
	}
	s.probeSink.Listed(guid, ep, names, info)
}
