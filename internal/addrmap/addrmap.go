// Package addrmap holds the address-mapping rules for NAT and container
// networks: which endpoint to name to a client instead of the one pvans
// learned. pvans learns a server at the address it beacons from (say
// 172.17.0.5:5075 on a container bridge); a client outside that network
// must be told the address and port it can reach (the host's published
// 10.0.0.5:15075). A rule is chosen by the learned endpoint and the
// client's address; clients it does not cover keep the real endpoint.
//
// The package is pure data and functions: parsing, printing, matching. It
// does not know where the rules come from (internal/config) or where the
// answer goes (resolver.Endpoint.Wire).
package addrmap

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Rule rewrites the endpoint named to some clients.
type Rule struct {
	// Servers match the learned server address (a prefix; a bare address
	// is a /32 or /128); Endpoints match an exact address and port.
	Servers   []netip.Prefix
	Endpoints []netip.AddrPort
	// Clients the rule is for (empty: every client), minus Except.
	Clients []netip.Prefix
	Except  []netip.Prefix
	// To is the address named instead (invalid: keep the real one); ToPort
	// the port (0: keep it, or look it up in Ports).
	To     netip.Addr
	ToPort uint16
	// Ports maps real server ports to published ones, and ByEndpoint
	// real server endpoints (IOCs that share a port at different
	// addresses) to published ports; an endpoint's entry comes first.
	// With a table, a server in neither is not covered by the rule: an
	// unpublished port behind the NAT address would reach nothing.
	Ports      map[uint16]uint16
	ByEndpoint map[netip.AddrPort]uint16

	text string
}

// Map is an ordered list of rules; the first one that matches applies.
type Map []Rule

// Apply returns the endpoint to name to client for a server learned at
// server, and whether a rule applied.
func (m Map) Apply(server netip.AddrPort, client netip.Addr) (netip.AddrPort, bool) {
	if len(m) == 0 {
		return server, false
	}
	server = netip.AddrPortFrom(server.Addr().Unmap(), server.Port())
	client = client.Unmap()
	for i := range m {
		if out, ok := m[i].apply(server, client); ok {
			return out, true
		}
	}
	return server, false
}

func (r *Rule) apply(server netip.AddrPort, client netip.Addr) (netip.AddrPort, bool) {
	if !r.matchServer(server) {
		return server, false
	}
	if len(r.Clients) > 0 && !containsAddr(r.Clients, client) {
		return server, false
	}
	if containsAddr(r.Except, client) {
		return server, false
	}
	addr, port := server.Addr(), server.Port()
	switch {
	case r.ToPort != 0:
		port = r.ToPort
	case r.Ports != nil:
		p, ok := r.ByEndpoint[server]
		if !ok {
			p, ok = r.Ports[port]
		}
		if !ok {
			return server, false
		}
		port = p
	}
	if r.To.IsValid() {
		addr = r.To
	}
	return netip.AddrPortFrom(addr, port), true
}

func (r *Rule) matchServer(server netip.AddrPort) bool {
	return slices.Contains(r.Endpoints, server) || containsAddr(r.Servers, server.Addr())
}

func containsAddr(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// String is the rule as written (normalised).
func (r Rule) String() string { return r.text }

// MarshalText prints the rule.
func (r Rule) MarshalText() ([]byte, error) { return []byte(r.text), nil }

// Parse reads one rule: fields key=value separated by ';' or white space,
//
//	servers=172.17.0.0/16,172.18.0.9:5075   learned address prefixes or exact addr:port (required)
//	clients=10.0.0.0/8                      clients covered (default: every client)
//	except_clients=172.17.0.0/16            clients not covered
//	to=10.0.0.5  or  to=10.0.0.5:15075      endpoint named instead (IPv6 as [addr]:port)
//	ports=5075:15075,5085:15085             real port → published port
//	ports=10.1.0.5:5075:15075,...           real endpoint → published port
//	                                        (IPv6 as [addr]:port:published)
//
// At least one of to and ports is needed; to with a port excludes ports.
func Parse(s string) (Rule, error) {
	var r Rule
	seen := map[string]bool{}
	fields := strings.FieldsFunc(s, func(c rune) bool { return c == ';' || unicode.IsSpace(c) })
	if len(fields) == 0 {
		return r, errors.New("empty rule")
	}
	var parts []string
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || v == "" {
			return r, fmt.Errorf("%q: want key=value (servers, clients, except_clients, to, ports)", f)
		}
		if seen[k] {
			return r, fmt.Errorf("%s given twice", k)
		}
		seen[k] = true
		var err error
		switch k {
		case "servers":
			err = r.parseServers(v)
		case "clients":
			r.Clients, err = parsePrefixes(v)
		case "except_clients":
			r.Except, err = parsePrefixes(v)
		case "to":
			err = r.parseTo(v)
		case "ports":
			err = r.parsePorts(v)
		default:
			err = errors.New("unknown key (servers, clients, except_clients, to, ports)")
		}
		if err != nil {
			return Rule{}, fmt.Errorf("%s: %w", k, err)
		}
		parts = append(parts, k+"="+v)
	}
	switch {
	case len(r.Servers) == 0 && len(r.Endpoints) == 0:
		return Rule{}, errors.New("servers= is required")
	case !r.To.IsValid() && r.Ports == nil:
		return Rule{}, errors.New("to= or ports= is required")
	case r.ToPort != 0 && r.Ports != nil:
		return Rule{}, errors.New("to= with a port and ports= exclude each other")
	}
	r.text = strings.Join(parts, ";")
	return r, nil
}

// ParseMap parses one rule per item.
func ParseMap(items []string) (Map, error) {
	var m Map
	for _, it := range items {
		r, err := Parse(it)
		if err != nil {
			return nil, fmt.Errorf("rule %q: %w", it, err)
		}
		m = append(m, r)
	}
	return m, nil
}

func (r *Rule) parseServers(v string) error {
	for _, s := range strings.Split(v, ",") {
		if ap, err := netip.ParseAddrPort(s); err == nil {
			if ap.Addr().Zone() != "" || ap.Port() == 0 {
				return fmt.Errorf("%q: want an address:port with a port and no zone", s)
			}
			r.Endpoints = append(r.Endpoints, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
			continue
		}
		p, err := parsePrefix(s)
		if err != nil {
			return err
		}
		r.Servers = append(r.Servers, p)
	}
	return nil
}

func parsePrefixes(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(v, ",") {
		p, err := parsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix", s)
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				return netip.Prefix{}, fmt.Errorf("%q: IPv4-mapped prefix shorter than /96", s)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not an address or CIDR prefix", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func (r *Rule) parseTo(v string) error {
	if ap, err := netip.ParseAddrPort(v); err == nil {
		if ap.Port() == 0 {
			return errors.New("port 0")
		}
		r.To, r.ToPort = ap.Addr().Unmap(), ap.Port()
	} else if a, err := netip.ParseAddr(v); err == nil {
		r.To = a.Unmap()
	} else {
		return fmt.Errorf("%q is not an address or address:port (IPv6 as [addr]:port)", v)
	}
	if r.To.Zone() != "" || r.To.IsUnspecified() || r.To.IsMulticast() {
		return fmt.Errorf("%q cannot be named to a client", v)
	}
	return nil
}

func (r *Rule) parsePorts(v string) error {
	r.Ports = map[uint16]uint16{}
	for _, s := range strings.Split(v, ",") {
		// The published port follows the last colon; before it stands a
		// real port, or a real endpoint (addr:port, [v6]:port).
		a, b, ok := cutLast(s, ":")
		if !ok {
			return fmt.Errorf("%q: want real:published or addr:real:published", s)
		}
		pub, err := port(b)
		if err != nil {
			return fmt.Errorf("%q: %w", s, err)
		}
		if ep, err := netip.ParseAddrPort(a); err == nil {
			if ep.Port() == 0 || ep.Addr().Zone() != "" {
				return fmt.Errorf("%q: want an endpoint with a port and no zone", s)
			}
			ep = netip.AddrPortFrom(ep.Addr().Unmap(), ep.Port())
			if r.ByEndpoint == nil {
				r.ByEndpoint = map[netip.AddrPort]uint16{}
			}
			if _, dup := r.ByEndpoint[ep]; dup {
				return fmt.Errorf("%s mapped twice", ep)
			}
			r.ByEndpoint[ep] = pub
			continue
		}
		real, err := port(a)
		if err != nil {
			return fmt.Errorf("%q: %w", s, err)
		}
		if _, dup := r.Ports[real]; dup {
			return fmt.Errorf("port %d mapped twice", real)
		}
		r.Ports[real] = pub
	}
	return nil
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

func port(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not a port 1-65535", s)
	}
	return uint16(n), nil
}
