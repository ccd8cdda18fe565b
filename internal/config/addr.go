package config

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Resolver turns a host name into addresses. Load takes one so tests never
// touch DNS.
type Resolver func(host string) ([]netip.Addr, error)

// SystemResolver answers "localhost" itself (127.0.0.1, without asking
// anyone) and asks the system resolver for anything else, with a 5 s limit
// so a dead DNS server cannot hang the start.
func SystemResolver(host string) ([]netip.Addr, error) {
	if strings.EqualFold(host, "localhost") {
		return []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1})}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// Endpoint is one entry of an EPICS address list, the PVXS SockEndpoint:
// an address and port, and for a multicast destination the TTL (hop limit)
// and interface its datagrams are sent with. For unicast and broadcast
// entries TTL and Iface are checked and then dropped, as PVXS drops them
// when it prints the list back.
type Endpoint struct {
	netip.AddrPort
	// TTL of multicast sends (IP_MULTICAST_TTL, IPV6_MULTICAST_HOPS);
	// NoTTL means not given: the kernel default, 1.
	TTL int
	// Iface is the interface multicast sends leave through (and groups
	// are joined on): a name, or for IPv4 an address of the interface.
	// Empty: the routing table decides.
	Iface string
	// Host is the host name the entry was written with ("" for an
	// address): AddrPort holds its address at load (the first, an IPv4
	// one preferred, as PVXS takes it), and the daemon resolves it again
	// every dns.refresh, taking all its addresses.
	Host string
}

// NoTTL is Endpoint.TTL when the entry gave none (PVXS's -1).
const NoTTL = -1

// EndpointOf is a plain unicast endpoint.
func EndpointOf(ap netip.AddrPort) Endpoint { return Endpoint{AddrPort: ap, TTL: NoTTL} }

// IsMulticast reports whether the destination is a multicast group.
func (e Endpoint) IsMulticast() bool { return e.Addr().IsMulticast() }

// String prints the entry as PVXS does: TTL and interface only for
// multicast. Parsing the result gives the same Endpoint.
func (e Endpoint) String() string {
	s := e.AddrPort.String()
	if e.IsMulticast() {
		if e.TTL != NoTTL {
			s += "," + strconv.Itoa(e.TTL)
		}
		if e.Iface != "" {
			s += "@" + e.Iface
		}
	}
	return s
}

// MarshalText is String (the embedded AddrPort's would drop TTL and
// interface).
func (e Endpoint) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// AddrPorts drops the TTLs and interfaces.
func AddrPorts(l []Endpoint) []netip.AddrPort {
	if l == nil {
		return nil
	}
	out := make([]netip.AddrPort, len(l))
	for i, e := range l {
		out[i] = e.AddrPort
	}
	return out
}

// ParseAddrList parses an EPICS address list (see parseEndpoints) into
// addresses and ports, without the multicast TTLs and interfaces. Host
// names are resolved with SystemResolver.
func ParseAddrList(s string, defPort uint16) ([]netip.AddrPort, error) {
	return ParseAddrListWith(s, defPort, SystemResolver)
}

// ParseAddrListWith is ParseAddrList with a chosen resolver.
func ParseAddrListWith(s string, defPort uint16, resolve Resolver) ([]netip.AddrPort, error) {
	l, err := parseEndpoints(strings.Fields(s), defPort, resolve)
	return AddrPorts(merged(l)), err
}

// merged merges the entries equal in address, port and interface that
// parseEndpoints keeps apart because they came from different host names,
// as PVXS merges them: the first one's place, the longest TTL.
func merged(l []Endpoint) []Endpoint {
	type key struct {
		ap    netip.AddrPort
		iface string
	}
	seen := make(map[key]int, len(l))
	out := l[:0:0]
	for _, e := range l {
		k := key{e.AddrPort, e.Iface}
		if i, dup := seen[k]; dup {
			out[i].TTL = max(out[i].TTL, e.TTL)
			continue
		}
		seen[k] = len(out)
		out = append(out, e)
	}
	return out
}

// parseInterfaces splits EPICS_PVAS_INTF_ADDR_LIST as PVXS does: unicast
// and wildcard entries are interface addresses (ports ignored); multicast
// entries (group[@iface]) are groups joined to receive searches on.
func parseInterfaces(items []string, resolve Resolver) ([]netip.Addr, []Endpoint, error) {
	eps, err := parseEndpoints(items, 0, resolve)
	if err != nil {
		return nil, nil, err
	}
	var addrs []netip.Addr
	var groups []Endpoint
	seen := make(map[netip.Addr]bool, len(eps))
	for _, ep := range eps {
		ep.Host = "" // interfaces are resolved once, at load
		switch {
		case ep.IsMulticast():
			ep.AddrPort = netip.AddrPortFrom(ep.Addr(), 0)
			ep.TTL = NoTTL
			if !slices.Contains(groups, ep) {
				groups = append(groups, ep)
			}
		case !seen[ep.Addr()]:
			seen[ep.Addr()] = true
			addrs = append(addrs, ep.Addr())
		}
	}
	return addrs, groups, nil
}

// parseEndpoints parses the entries of an EPICS address list the way PVXS
// does (SockEndpoint, documented in PVXS's netconfig "Address Spec"):
// whitespace-separated entries of the forms
//
//	host[:port][,TTL][@iface]
//	[ipv6-or-host][:port][,TTL][@iface]
//	ipv6                        (bare, no port)
//
// A missing port, or port 0, is defPort. Port and TTL are C integers
// (strtoull base 0: 0x1F is hex, a leading 0 is octal), as PVXS reads
// them. TTL (0-255) and @iface matter only for multicast destinations; on
// other entries they are checked and dropped. An IPv6 zone
// ([ff02::1%br0]) names the interface, as in PVXS. Host names are looked
// up once, an IPv4 address preferred. Entries equal in address, port and
// interface are merged keeping the longest TTL, the first one's place
// kept. Unlike PVXS, which logs and skips a bad entry (or truncates a
// port above 65535), one bad entry refuses the whole list: a half-applied
// list is a silently different network.
func parseEndpoints(items []string, defPort uint16, resolve Resolver) ([]Endpoint, error) {
	var out []Endpoint
	type key struct {
		ap    netip.AddrPort
		iface string
		host  string // a name and an address are followed apart
	}
	seen := make(map[key]int)
	for _, item := range items {
		for _, tok := range strings.Fields(item) {
			ep, err := parseEndpoint(tok, defPort, resolve)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", tok, err)
			}
			k := key{ep.AddrPort, ep.Iface, ep.Host}
			if i, dup := seen[k]; dup {
				// PVXS removeDups: one entry, the longest TTL.
				out[i].TTL = max(out[i].TTL, ep.TTL)
				continue
			}
			seen[k] = len(out)
			out = append(out, ep)
		}
	}
	return out, nil
}

// parseEndpoint parses one entry (PVXS SockEndpoint + SockAddr::setAddress).
func parseEndpoint(tok string, defPort uint16, resolve Resolver) (Endpoint, error) {
	if strings.Contains(tok, "://") {
		return Endpoint{}, errors.New("URIs are not addresses; write host[:port]")
	}
	ep := Endpoint{TTL: NoTTL}
	hostPort := tok
	comma, at := strings.IndexByte(tok, ','), strings.IndexByte(tok, '@')
	if comma >= 0 && at >= 0 && comma > at {
		return Endpoint{}, errors.New("comma expected before @ (write addr,TTL@iface)")
	}
	if at >= 0 {
		ep.Iface = tok[at+1:]
		if err := checkIface(ep.Iface); err != nil {
			return Endpoint{}, err
		}
		hostPort = tok[:at]
	}
	if comma >= 0 {
		ttlText := hostPort[comma+1:]
		hostPort = hostPort[:comma]
		ttl, err := parseCUint(ttlText)
		if err != nil || ttl > 255 {
			return Endpoint{}, fmt.Errorf("TTL %q must be a number 0-255", ttlText)
		}
		ep.TTL = int(ttl)
	}
	var host string // the name looked up, if the entry is one
	named := resolve
	if resolve != nil {
		named = func(h string) ([]netip.Addr, error) { host = h; return resolve(h) }
	}
	a, portText, err := splitHostPort(hostPort, named)
	if err != nil {
		return Endpoint{}, err
	}
	ep.Host = host
	if z := a.Zone(); z != "" {
		// PVXS turns a scope id into the interface name and drops it
		// from the address. The zone must then be a name @ would take.
		if err := checkIface(z); err != nil {
			return Endpoint{}, fmt.Errorf("IPv6 zone: %w", err)
		}
		if ep.Iface == "" {
			ep.Iface = z
		}
		a = a.WithZone("")
		if !a.IsMulticast() {
			return Endpoint{}, errors.New("an IPv6 zone is used only as the interface of a multicast destination (PVXS drops it from unicast addresses, which then cannot be reached)")
		}
	}
	a = a.Unmap()
	port := defPort
	if portText != "" {
		p, err := parseCUint(portText)
		if err != nil {
			return Endpoint{}, fmt.Errorf("port %q is not a number", portText)
		}
		if p > 65535 {
			return Endpoint{}, fmt.Errorf("port %s is above 65535", portText)
		}
		if p != 0 { // PVXS: port 0 means the default port
			port = uint16(p)
		}
	}
	ep.AddrPort = netip.AddrPortFrom(a, port)
	if !a.IsMulticast() {
		ep.TTL, ep.Iface = NoTTL, ""
	}
	return ep, nil
}

// splitHostPort is SockAddr::setAddress: [ipv6]:port, [ipv6], bare ipv6,
// ipv4-or-host:port, ipv4-or-host.
func splitHostPort(s string, resolve Resolver) (netip.Addr, string, error) {
	if s == "" {
		return netip.Addr{}, "", errors.New("empty address")
	}
	openb, closeb := strings.IndexByte(s, '['), strings.LastIndexByte(s, ']')
	if (openb < 0) != (closeb < 0) {
		return netip.Addr{}, "", errors.New("IPv6 with mismatched brackets")
	}
	var host, portText string
	bracketed := openb >= 0
	switch {
	case bracketed:
		if openb != 0 || closeb < openb {
			return netip.Addr{}, "", errors.New("IPv6 with mismatched brackets")
		}
		host, rest := s[1:closeb], s[closeb+1:]
		if rest != "" {
			if rest[0] != ':' {
				return netip.Addr{}, "", errors.New("expected :port after the closing bracket")
			}
			portText = rest[1:]
			if portText == "" {
				return netip.Addr{}, "", errors.New("empty port after the colon")
			}
		}
		if host == "" {
			return netip.Addr{}, "", errors.New("empty address inside the brackets")
		}
		if a, err := netip.ParseAddr(host); err == nil {
			if !a.Is6() {
				return netip.Addr{}, "", errors.New("not an IPv6 address inside the brackets")
			}
			return a, portText, nil
		}
		a, err := lookup(host, resolve)
		return a, portText, err
	case strings.Count(s, ":") > 1:
		// No brackets and several colons: a bare IPv6 address, all address.
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Addr{}, "", errors.New("not an IPv6 address (with a port, write [addr]:port)")
		}
		return a, "", nil
	}
	host = s
	if i := strings.IndexByte(s, ':'); i >= 0 {
		host, portText = s[:i], s[i+1:]
		if portText == "" {
			return netip.Addr{}, "", errors.New("empty port after the colon")
		}
	}
	if host == "" {
		return netip.Addr{}, "", errors.New("empty host")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() {
			return netip.Addr{}, "", errors.New("not an IPv4 address")
		}
		return a, portText, nil
	}
	a, err := lookup(host, resolve)
	return a, portText, err
}

func lookup(host string, resolve Resolver) (netip.Addr, error) {
	if resolve == nil {
		return netip.Addr{}, errors.New("not an IP address")
	}
	addrs, err := resolve(host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("cannot resolve host: %v", err)
	}
	if len(addrs) == 0 {
		return netip.Addr{}, errors.New("cannot resolve host: no addresses")
	}
	// PVXS (SockAddr::setAddress) takes an IPv4 address when a name has one.
	a := addrs[0]
	for _, x := range addrs {
		if x.Unmap().Is4() {
			a = x
			break
		}
	}
	return a, nil
}

// parseCUint reads an unsigned integer as strtoull(s, 0) does when it must
// consume the whole string: 0x/0X hexadecimal, a leading 0 octal, else
// decimal. Signs are refused (strtoull would wrap "-1").
func parseCUint(s string) (uint64, error) {
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, errors.New("not a number")
	}
	base := 10
	switch {
	case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, s = 8, s[1:]
	}
	n, err := strconv.ParseUint(s, base, 64)
	if errors.Is(err, strconv.ErrRange) {
		return math.MaxUint64, nil
	}
	if err != nil || strings.ContainsAny(s, "_+-") {
		return 0, errors.New("not a number")
	}
	return n, nil
}

// checkIface checks the text after @: an interface name (at most 15
// bytes, the kernel's IFNAMSIZ-1) or an address. Whether it exists is
// the daemon's question, asked when it sends, as PVXS warns only then.
func checkIface(s string) error {
	if s == "" {
		return nil // PVXS: "@" alone is no interface
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return nil
	}
	if len(s) > 15 || strings.ContainsAny(s, "/,@[]%") {
		return fmt.Errorf("%q is not an interface name or address", s)
	}
	return nil
}

func parsePortNumber(s string, allowZero bool) (uint16, error) {
	lo := uint64(1)
	if allowZero {
		lo = 0
	}
	rangeErr := fmt.Errorf("port must be %d-65535", lo)
	n, err := strconv.ParseUint(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, rangeErr
	}
	if err != nil {
		return 0, fmt.Errorf("port %q is not a number", s)
	}
	if n < lo || n > 65535 {
		return 0, rangeErr
	}
	return uint16(n), nil
}

// ParsePrefixList parses whitespace-separated CIDR prefixes; a bare
// address stands for itself (/32 or /128).
func ParsePrefixList(items []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range items {
		for _, tok := range strings.Fields(item) {
			p, err := parsePrefix(tok)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", tok, err)
			}
			out = append(out, p)
		}
	}
	return out, nil
}

func parsePrefix(tok string) (netip.Prefix, error) {
	if strings.Contains(tok, "/") {
		p, err := netip.ParsePrefix(tok)
		if err != nil {
			return netip.Prefix{}, errors.New("not a CIDR prefix (addr/bits)")
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			if p.Bits() < 0 {
				return netip.Prefix{}, errors.New("IPv4-mapped prefix shorter than /96")
			}
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(tok)
	if err != nil {
		return netip.Prefix{}, errors.New("not an IP address or CIDR prefix")
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
