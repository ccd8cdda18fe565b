package config

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
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

// ParseAddrList parses an EPICS address list: whitespace-separated
// host[:port] entries, IPv6 as [addr]:port (or a bare IPv6 address without
// a port). A missing port is defPort; ports must be 1-65535. Host names are
// resolved with SystemResolver. Duplicates are dropped, first one kept.
func ParseAddrList(s string, defPort uint16) ([]netip.AddrPort, error) {
	return parseAddrList(strings.Fields(s), defPort, false, SystemResolver)
}

// ParseAddrListWith is ParseAddrList with a chosen resolver.
func ParseAddrListWith(s string, defPort uint16, resolve Resolver) ([]netip.AddrPort, error) {
	return parseAddrList(strings.Fields(s), defPort, false, resolve)
}

// ParseIgnoreAddrList parses EPICS_PVAS_IGNORE_ADDR_LIST: like
// ParseAddrList, but a missing port is 0 and port 0 means any port.
func ParseIgnoreAddrList(s string) ([]netip.AddrPort, error) {
	return parseAddrList(strings.Fields(s), 0, true, SystemResolver)
}

// ParseInterfaceList parses EPICS_PVAS_INTF_ADDR_LIST: an address list
// whose ports are parsed and ignored, as in PVXS.
func ParseInterfaceList(s string) ([]netip.Addr, error) {
	return parseInterfaceList(strings.Fields(s), SystemResolver)
}

// IgnoreMatches reports whether src matches an ignore-list entry; an entry
// with port 0 matches every port of its address.
func IgnoreMatches(list []netip.AddrPort, src netip.AddrPort) bool {
	a := src.Addr().Unmap()
	for _, e := range list {
		if e.Addr() == a && (e.Port() == 0 || e.Port() == src.Port()) {
			return true
		}
	}
	return false
}

func parseInterfaceList(items []string, resolve Resolver) ([]netip.Addr, error) {
	aps, err := parseAddrList(items, 0, true, resolve)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(aps))
	seen := make(map[netip.Addr]bool, len(aps))
	for _, ap := range aps {
		if !seen[ap.Addr()] {
			seen[ap.Addr()] = true
			out = append(out, ap.Addr())
		}
	}
	return out, nil
}

// parseAddrList reports the first bad entry; one bad entry refuses the
// whole list, because a half-applied list is a silently different network.
func parseAddrList(items []string, defPort uint16, allowZeroPort bool, resolve Resolver) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	seen := make(map[netip.AddrPort]bool)
	for _, item := range items {
		for _, tok := range strings.Fields(item) {
			ap, err := parseEndpoint(tok, defPort, allowZeroPort, resolve)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", tok, err)
			}
			if !seen[ap] {
				seen[ap] = true
				out = append(out, ap)
			}
		}
	}
	return out, nil
}

func parseEndpoint(tok string, defPort uint16, allowZeroPort bool, resolve Resolver) (netip.AddrPort, error) {
	if strings.Contains(tok, "://") || strings.ContainsAny(tok, ",@") {
		return netip.AddrPort{}, errors.New("URI, TTL and @interface forms are not supported; write host[:port]")
	}
	host, portText := tok, ""
	switch {
	case strings.HasPrefix(tok, "["):
		end := strings.IndexByte(tok, ']')
		if end < 0 {
			return netip.AddrPort{}, errors.New("missing ] after IPv6 address")
		}
		host, rest := tok[1:end], tok[end+1:]
		if rest != "" {
			if rest[0] != ':' {
				return netip.AddrPort{}, errors.New("expected :port after ]")
			}
			portText = rest[1:]
		}
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return netip.AddrPort{}, errors.New("not an IPv6 address inside [ ]")
		}
		return withPort(a, portText, defPort, allowZeroPort)
	default:
		if a, err := netip.ParseAddr(tok); err == nil {
			// Bare address, IPv6 included: the whole token is the address.
			return withPort(a, "", defPort, allowZeroPort)
		}
		if i := strings.LastIndexByte(tok, ':'); i >= 0 {
			host, portText = tok[:i], tok[i+1:]
			if portText == "" {
				return netip.AddrPort{}, errors.New("empty port after :")
			}
		}
	}
	if host == "" {
		return netip.AddrPort{}, errors.New("empty host")
	}
	if strings.Contains(host, ":") {
		return netip.AddrPort{}, errors.New("IPv6 address with a port must be written [addr]:port")
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		if resolve == nil {
			return netip.AddrPort{}, errors.New("not an IP address")
		}
		addrs, rerr := resolve(host)
		if rerr != nil {
			return netip.AddrPort{}, fmt.Errorf("cannot resolve host: %v", rerr)
		}
		if len(addrs) == 0 {
			return netip.AddrPort{}, errors.New("cannot resolve host: no addresses")
		}
		// PVXS (aToIPAddr) takes an IPv4 address when a name has one.
		a = addrs[0]
		for _, x := range addrs {
			if x.Unmap().Is4() {
				a = x
				break
			}
		}
	}
	return withPort(a, portText, defPort, allowZeroPort)
}

func withPort(a netip.Addr, portText string, defPort uint16, allowZero bool) (netip.AddrPort, error) {
	if a.Zone() != "" {
		// The daemon keys peers by address; a zone would make the same
		// peer two different keys.
		return netip.AddrPort{}, errors.New("IPv6 zones are not supported")
	}
	a = a.Unmap()
	port := defPort
	if portText != "" {
		p, err := parsePortNumber(portText, allowZero)
		if err != nil {
			return netip.AddrPort{}, err
		}
		port = p
	}
	return netip.AddrPortFrom(a, port), nil
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
