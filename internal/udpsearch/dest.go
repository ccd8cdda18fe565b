package udpsearch

import (
	"net"
	"net/netip"
	"strconv"
)

// Destination is one place pvans sends its own searches, discovery pings
// or beacons to: an address list entry (PVXS SockEndpoint). TTL and Iface
// apply to multicast groups only, as in PVXS.
type Destination struct {
	Addr netip.AddrPort
	// TTL is the multicast TTL (IPv4) or hop limit (IPv6); negative: the
	// kernel default, 1.
	TTL int
	// Iface is the interface multicast datagrams leave through: a name,
	// or for IPv4 one of the interface's addresses. Empty: the routing
	// table decides.
	Iface string
}

// Unicast makes destinations of plain addresses.
func Unicast(aps ...netip.AddrPort) []Destination {
	out := make([]Destination, len(aps))
	for i, ap := range aps {
		out[i] = Destination{Addr: ap, TTL: -1}
	}
	return out
}

func (d Destination) String() string {
	s := d.Addr.String()
	if d.Addr.Addr().IsMulticast() {
		if d.TTL >= 0 {
			s += "," + strconv.Itoa(d.TTL)
		}
		if d.Iface != "" {
			s += "@" + d.Iface
		}
	}
	return s
}

// sendDest is a Destination with its interface looked up once, when the
// sockets open (PVXS resolves the name when it parses the list).
type sendDest struct {
	Destination
	multicast bool
	ifIndex   int        // 0: none or unknown
	ifAddr    netip.Addr // IPv4 interface address when Iface was one
}

// resolveDests looks up each multicast destination's interface. An
// unknown interface is reported through warn and the group is sent to by
// the routing table, as PVXS does (it warns "Invalid interface address or
// name" and carries on).
func resolveDests(ds []Destination, warn func(Destination)) []sendDest {
	out := make([]sendDest, len(ds))
	for i, d := range ds {
		sd := sendDest{Destination: d, multicast: d.Addr.Addr().IsMulticast()}
		if sd.multicast && d.Iface != "" {
			if a, err := netip.ParseAddr(d.Iface); err == nil {
				if a.Unmap().Is4() {
					sd.ifAddr = a.Unmap()
				} else if warn != nil {
					warn(d)
				}
			} else if ifi, err := net.InterfaceByName(d.Iface); err == nil {
				sd.ifIndex = ifi.Index
			} else if warn != nil {
				warn(d)
			}
		}
		out[i] = sd
	}
	return out
}
