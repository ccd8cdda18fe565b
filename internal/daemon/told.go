package daemon

import (
	"net/netip"

	"github.com/pvans-project/pvans/internal/answer"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/resolver"
)

// told is the HTTP API's ?client= view: what a client at client is told
// for name, decided as its answers are (answer.Told: the claim's
// refusals, the address map in force, the loopback rule), by a search
// offering "tcp", or "tls" and "tcp" when tls. A name the name policy
// refuses is told nothing ("name_policy"), as Lookup answers it.
func (d *Daemon) told(name string, client netip.Addr, tls bool) httpapi.Claimed {
	if !d.Resolver.Answers([]byte(name)) {
		// The name access list (or the name's length) refuses every
		// search for it, before any claim.
		return httpapi.Claimed{Withheld: "name_policy"}
	}
	h, ok := d.Registry.LookupName(name)
	if !ok {
		// Gone since the API read it: nothing is named.
		return httpapi.Claimed{Withheld: "unheld"}
	}
	off := answer.TCP
	if tls {
		off |= answer.TLS
	}
	c, withheld := answer.Told(resolver.EndpointOf(h), off, client, d.conf().Map.Rules)
	return httpapi.Claimed{Addr: c.Addr, Port: c.Port, Protocol: c.Protocol, Withheld: withheld}
}
