package udpsearch

import (
	"net"
	"net/netip"
	"slices"
)

// Interface is one network interface as the classifier needs it.
type Interface struct {
	Index    int
	Name     string
	Up       bool
	Loopback bool
	// Broadcast reports the interface supports broadcast (IFF_BROADCAST).
	Broadcast bool
	// Prefixes are its IPv4 and IPv6 addresses with their prefix lengths.
	Prefixes []netip.Prefix
}

// ReadInterfaces lists the interfaces of the network namespace of the
// calling thread, with their IPv4 and IPv6 addresses.
func ReadInterfaces() ([]Interface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]Interface, 0, len(ifs))
	for _, ifi := range ifs {
		addrs, err := ifi.Addrs()
		if err != nil {
			return nil, err
		}
		it := Interface{
			Index: ifi.Index, Name: ifi.Name,
			Up:        ifi.Flags&net.FlagUp != 0,
			Loopback:  ifi.Flags&net.FlagLoopback != 0,
			Broadcast: ifi.Flags&net.FlagBroadcast != 0,
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ones, _ := ipn.Mask.Size()
			if ip.Is4In6() && len(ipn.Mask) == net.IPv6len {
				ones -= 96
			}
			ip = ip.Unmap()
			it.Prefixes = append(it.Prefixes, netip.PrefixFrom(ip, ones))
		}
		out = append(out, it)
	}
	return out, nil
}

// directedBroadcast is the subnet broadcast address of p, if it has one.
func directedBroadcast(p netip.Prefix) (netip.Addr, bool) {
	if !p.Addr().Is4() || p.Bits() > 30 || p.Bits() < 0 {
		return netip.Addr{}, false
	}
	a := p.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= ^uint32(0) >> p.Bits()
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// BroadcastAddrList is the PVXS automatic address list for ifs: the
// broadcast address of every IPv4 address of every up, broadcast-capable,
// non-loopback interface, at port. Pure; see AutoAddrList.
func BroadcastAddrList(ifs []Interface, port uint16) []netip.AddrPort {
	var out []netip.AddrPort
	seen := map[netip.Addr]bool{}
	for _, it := range ifs {
		if !it.Up || it.Loopback || !it.Broadcast {
			continue
		}
		for _, p := range it.Prefixes {
			if b, ok := directedBroadcast(p); ok && !seen[b] {
				seen[b] = true
				out = append(out, netip.AddrPortFrom(b, port))
			}
		}
	}
	return out
}

// AutoAddrList reads the host's interfaces and returns BroadcastAddrList
// (EPICS_PVA_AUTO_ADDR_LIST) of those holding an address of on, or of
// every interface when on is nil. The daemon's wiring may append it to
// Options.AddrList; tests never use it.
func AutoAddrList(port uint16, on []netip.Addr) ([]netip.AddrPort, error) {
	ifs, err := ReadInterfaces()
	if err != nil {
		return nil, err
	}
	return BroadcastAddrList(Holding(ifs, on), port), nil
}

// Holding is the interfaces of ifs holding an address of on; all of
// them when on is nil.
func Holding(ifs []Interface, on []netip.Addr) []Interface {
	if on == nil {
		return ifs
	}
	var out []Interface
	for _, it := range ifs {
		if slices.ContainsFunc(it.Prefixes, func(p netip.Prefix) bool { return slices.Contains(on, p.Addr()) }) {
			out = append(out, it)
		}
	}
	return out
}

// ifaceTable is an immutable view of the interfaces for classification.
type ifaceTable struct {
	byIndex map[int]*ifaceInfo
	// local maps every local address to the interface owning it.
	local map[netip.Addr]int
	// bcast is every directed broadcast address of the host.
	bcast   map[netip.Addr]bool
	loIndex int // a loopback interface index, 0 if none
}

type ifaceInfo struct {
	Interface
	// bcast maps each broadcast address of the interface to the address
	// owning it (the reply-from address for broadcast searches).
	bcast map[netip.Addr]netip.Addr
	first netip.Addr // first IPv4 address, or invalid
	// first6 is the reply-from address for IPv6 multicast searches: the
	// first global IPv6 address, else the first link-local one.
	first6 netip.Addr
}

func newIfaceTable(ifs []Interface) *ifaceTable {
	t := &ifaceTable{byIndex: map[int]*ifaceInfo{}, local: map[netip.Addr]int{}, bcast: map[netip.Addr]bool{}}
	for _, it := range ifs {
		info := &ifaceInfo{Interface: it, bcast: map[netip.Addr]netip.Addr{}}
		for _, p := range it.Prefixes {
			a := p.Addr()
			switch {
			case !a.Is4():
				if !info.first6.IsValid() || (info.first6.IsLinkLocalUnicast() && !a.IsLinkLocalUnicast()) {
					info.first6 = a
				}
			case !info.first.IsValid():
				info.first = a
			}
			if _, dup := t.local[a]; !dup {
				t.local[a] = it.Index
			}
			if it.Broadcast {
				if b, ok := directedBroadcast(p); ok {
					info.bcast[b] = a
					t.bcast[b] = true
				}
			}
		}
		if it.Loopback && t.loIndex == 0 {
			t.loIndex = it.Index
		}
		t.byIndex[it.Index] = info
	}
	return t
}
