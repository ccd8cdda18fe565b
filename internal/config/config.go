// Package config owns pvans's one Config struct: its defaults, the YAML
// file, the EPICS_* environment variables with their PVXS meanings, the
// command-line flags, validation with errors that name the setting, the
// value and the reason, and a record of where every value came from.
//
// Precedence is flags over environment over file over defaults. Every
// source is parsed, even one a higher source overrides, so a typo in the
// file is refused at start rather than surfacing on the day the overriding
// flag is removed.
//
// It does not open sockets, read interface lists or apply anything: the
// daemon's parts receive plain values. Resolving host names in address
// lists is the one lookup it does, and the resolver is injectable.
package config

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/pvans-project/pvans/internal/addrmap"
)

// Config is the whole configuration of the daemon. Build it with Defaults
// or Load; Load records provenance, Defaults does not need to.
type Config struct {
	PVA       PVA
	HTTP      HTTP
	Log       Log
	Snapshot  Snapshot
	Registry  Registry
	TCP       TCP
	UDP       UDP
	Probe     Probe
	Beacon    Beacon
	Static    Static
	Search    Search
	Access    Access
	Map       Map
	RateLimit RateLimit
	Insight   Insight
	Discovery Discovery
	DNS       DNS
	Relay     Relay

	// prov maps a setting key to where its value came from; a missing key
	// means the default.
	prov map[string]origin
	// opts are kept so Reload can read the same sources again.
	opts   LoadOptions
	loaded bool
	// warnings: what the sources set that Load ignored (Warnings).
	warnings []string
}

// PVA holds the settings with EPICS environment variables. Their meanings
// are the PVXS server's (and, for the name servers and search list, the
// PVXS client's).
type PVA struct {
	// Interfaces the UDP and TCP listeners bind (EPICS_PVAS_INTF_ADDR_LIST).
	// Ports written in the list are parsed and ignored, as in PVXS.
	Interfaces []netip.Addr
	// SearchGroups are the multicast entries of the interface list
	// (group[@iface]): the UDP search port joins each, on its interface,
	// to receive searches sent to the group, as PVXS does.
	SearchGroups []Endpoint
	// ServerPort is the TCP name-server port.
	ServerPort uint16
	// BroadcastPort is the UDP search and beacon port.
	BroadcastPort uint16
	// AddrList is where discovery pings and search-through searches go.
	AddrList []Endpoint
	// AutoAddrList adds every interface broadcast address to AddrList.
	AutoAddrList bool
	// IgnoreAddrList: UDP searches from these sources are dropped; port 0
	// matches any source port.
	IgnoreAddrList []netip.AddrPort
	// BeaconAddrList is where the daemon's own beacons go, if it sends any.
	BeaconAddrList []Endpoint
	// AutoBeaconAddrList adds every interface broadcast address to
	// BeaconAddrList.
	AutoBeaconAddrList bool
	// NameServers are upstream TCP name servers to forward searches to.
	NameServers []netip.AddrPort
	// NameServerEntries are NameServers as written, host names kept
	// (Endpoint.Host) for the daemon to resolve again; Load sets both.
	NameServerEntries []Endpoint
	// ConnTmo is EPICS_PVA_CONN_TMO in seconds, as written; TCPTimeout is
	// what the connections use.
	ConnTmo float64
	// TLSKeychain is EPICS_PVAS_TLS_KEYCHAIN, "file[;password]": a PKCS#12
	// keychain; set, pvans also serves searches over TLS on TLSPort and
	// uses it as its client certificate. Empty: no TLS listener.
	TLSKeychain string
	// TLSPort is EPICS_PVAS_TLS_PORT, the TLS listener's port.
	TLSPort uint16
	// TLSOptions is EPICS_PVAS_TLS_OPTIONS as written
	// (client_cert=require|optional; see keychain.ParseOptions).
	TLSOptions string
}

// TCPTimeout is PVXS's tcpTimeout: 4/3 × EPICS_PVA_CONN_TMO, 40 s when
// that is not a positive finite number, and never under 2 s. The 4/3 keeps
// a 30 s setting from racing peers that echo every 30 s.
func (p PVA) TCPTimeout() time.Duration {
	tmo := p.ConnTmo * 4 / 3
	const maxSeconds = float64(math.MaxInt64 / int64(time.Second))
	switch {
	case math.IsNaN(tmo) || math.IsInf(tmo, 0) || tmo <= 0 || tmo >= maxSeconds:
		return 40 * time.Second
	case tmo < 2:
		return 2 * time.Second
	}
	return time.Duration(tmo * float64(time.Second))
}

// EchoInterval is PVXS's client echo period for tcpTimeout:
// clamp(tcpTimeout×3/8, 1 s, 15 s).
func (p PVA) EchoInterval() time.Duration {
	return min(max(p.TCPTimeout()*3/8, time.Second), 15*time.Second)
}

// ConnProfile is the per-connection limits of one kind of PVA TCP
// connection. pvans has two:
//
//   - clients: the name-server listener's connections from PVA clients,
//     whose bounds are constants beside the listener (tcpsearch,
//     DefaultMaxMessageBytes, DefaultReadTimeout). Anyone may open one,
//     many are open at once, and everything they legitimately send is
//     small (searches ≤ 64 KiB), so the message bound is small and a
//     message that trickles in is a slow-loris.
//   - probes (Probe.Conn): pvans's own connections to servers it lists and
//     to upstream name servers. There are few, to peers pvans chose, and a
//     listing reply carries every name of a server (millions of names are
//     tens of MiB, over a WAN link perhaps slowly), so the message bound is
//     large and a message may take longer.
//
// Both send only small requests or replies, so their send queues agree.
type ConnProfile struct {
	MaxMessageBytes  int64
	SendQueueBytes   int64
	HandshakeTimeout time.Duration
	// MessageTimeout bounds one message from its first byte to its last.
	MessageTimeout time.Duration
}

// HTTP is the metrics and health endpoint.
type HTTP struct {
	// Listen is host:port; empty turns the endpoint off.
	Listen string
	// WebConfigFile is an exporter-toolkit web configuration file (TLS,
	// client certificates, basic auth); empty serves plain HTTP.
	WebConfigFile string
	// AllowedHosts are the DNS names requests may name as Host besides
	// addresses, localhost and the machine's own names (DNS rebinding).
	AllowedHosts []string
}

// Log chooses what is logged and how.
type Log struct {
	Level  string // debug, info, warn, error
	Format string // auto (console on a terminal, json otherwise), console, json
}

// Snapshot is the registry's save file, so a restarted daemon answers at
// once instead of after a full probe round.
type Snapshot struct {
	// Path of the snapshot file; empty disables saving and loading.
	Path string
	// Interval between saves.
	Interval time.Duration
	// UnverifiedWindow: names loaded from a snapshot are answered for this
	// long without a probe confirming their server; then they are dropped.
	UnverifiedWindow time.Duration
}

// Registry bounds what the daemon remembers.
type Registry struct {
	MaxServers int // also the beacon tracking limit (PVXS: 20000)
	MaxNames   int
}

// TCP bounds the name-server listener.
type TCP struct {
	MaxConnections int
	// WaitersTotal bounds the unanswered names remembered for a push
	// answer over all connections.
	WaitersTotal int
}

// UDP is the port-5076 side.
type UDP struct {
	ReceiveBufferBytes int64 // SO_RCVBUF; 0 leaves the OS default
	AnswerSearches     bool  // answer UDP searches with registry names
	AnswerOverTCP      bool  // answer a paired client's UDP searches over its TCP connection
	SendBeacons        bool  // announce the daemon itself with beacons
	// LearnInterfaces are local addresses whose interfaces beacons,
	// discovery replies and search replies are taken from besides those
	// of PVA.Interfaces; a wildcard (written "all") takes them from every
	// interface. Empty: only PVA.Interfaces's.
	LearnInterfaces []netip.Addr
	// ClientReplyNamesPerSecond and ClientReplyNameBurst pace the replies
	// to one client socket, in the names they answer, so a big client's
	// start-up burst is not lost in its receive buffer; ReplyQueueBytes
	// bounds the replies held meanwhile.
	ClientReplyNamesPerSecond float64
}

// Probe is how servers are listed and watched.
type Probe struct {
	// Conn is the probes connection profile (see ConnProfile), also used
	// for upstream name servers. It has no file key.
	Conn ConnProfile
}

// Beacon is the server tracker.
type Beacon struct {
	Expiry time.Duration
}

// Static lists what is known without discovery.
type Static struct {
	Servers []netip.AddrPort // always probed
	// ServerEntries are Servers as written, host names kept
	// (Endpoint.Host) for the daemon to resolve again; Load sets both.
	ServerEntries []Endpoint
	NamesDir      string // directory of static name lists; empty = none
}

// Search chooses how unknown names and servers are looked for.
type Search struct {
	Through          bool // search unknown names on AddrList
	DiscoveryAtStart bool // send one discovery ping to AddrList at start
}

// Map rewrites the endpoint named in answers for clients that cannot reach
// the one pvans learned (servers behind NAT, in containers).
type Map struct {
	// Rules, first match wins; a client no rule covers is told the
	// learned endpoint.
	Rules addrmap.Map
}

// Access decides who may ask and who may be believed. For every list pair
// an empty allow list allows everyone, and deny wins over allow.
type Access struct {
	TCPClientAllow []netip.Prefix
	// TCPClientAllowCerts are the access.tcp_client_allow entries written
	// x509:NAME: a client on the TLS listener whose verified certificate's
	// x509 account is NAME (PVXS's: the first subject CN,
	// keychain.Account) is allowed from any
	// address not denied. With any of them the allow list is not empty:
	// an address outside TCPClientAllow is allowed only that way.
	TCPClientAllowCerts []string
	TCPClientDeny       []netip.Prefix
	UDPClientAllow      []netip.Prefix
	UDPClientDeny       []netip.Prefix
	NameAllow           []NamePattern
	NameDeny            []NamePattern
	// ServerAllow limits which server endpoints are probed and answered
	// with; empty allows all. A beacon or search reply must come from an
	// allowed sender and name an allowed server.
	ServerAllow []netip.Prefix
	// TrustedRelays are senders whose beacons and search replies may name
	// a server address other than their own (gateways, relays).
	TrustedRelays []netip.Prefix
}

// TCPClientAllowed reports whether a TCP client at a may connect by its
// address alone.
func (a *Access) TCPClientAllowed(addr netip.Addr) bool {
	if len(a.TCPClientAllow) == 0 && len(a.TCPClientAllowCerts) > 0 {
		return false // only certificates are allowed
	}
	return prefixesAllow(a.TCPClientAllow, a.TCPClientDeny, addr)
}

// TCPClientCertAllowed reports whether a client on the TLS listener at
// addr, with the verified certificate's x509 account cn (keychain.Account;
// "" for none),
// may search: by its address, or by an x509:NAME entry, never when its
// address is denied.
func (a *Access) TCPClientCertAllowed(addr netip.Addr, cn string) bool {
	if !prefixesAllow(nil, a.TCPClientDeny, addr) {
		return false
	}
	if cn != "" && slices.Contains(a.TCPClientAllowCerts, cn) {
		return true
	}
	return a.TCPClientAllowed(addr)
}

// UDPClientAllowed reports whether a UDP search from addr is answered.
func (a *Access) UDPClientAllowed(addr netip.Addr) bool {
	return prefixesAllow(a.UDPClientAllow, a.UDPClientDeny, addr)
}

// ServerAllowed reports whether a server at addr may be probed and named.
func (a *Access) ServerAllowed(addr netip.Addr) bool {
	return prefixesAllow(a.ServerAllow, nil, addr)
}

// NameAllowed reports whether name may be answered.
func (a *Access) NameAllowed(name string) bool {
	for i := range a.NameDeny {
		if a.NameDeny[i].Match(name) {
			return false
		}
	}
	if len(a.NameAllow) == 0 {
		return true
	}
	for i := range a.NameAllow {
		if a.NameAllow[i].Match(name) {
			return true
		}
	}
	return false
}

func prefixesAllow(allow, deny []netip.Prefix, addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, p := range deny {
		if p.Contains(addr) {
			return false
		}
	}
	if len(allow) == 0 {
		return true
	}
	for _, p := range allow {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// RateLimit bounds what one source can make the daemon do. Zero rates
// mean unlimited.
type RateLimit struct {
	UDPSearchesPerSecond float64 // per source address
	// UDPNamesPerSecond and UDPNameBurst budget the names a source's UDP
	// searches carry, however they are packed; the burst covers a big
	// client's start-up, which searches every channel at once.
	UDPNamesPerSecond    float64
	TCPMessagesPerSecond float64 // per source address
	// BeaconsPerSecond and BeaconBurst limit the beacons and discovery
	// replies taken from one sender address.
	BeaconsPerSecond float64
	// Exempt sources are never rate limited nor reflection capped (a
	// trusted gateway or a load-test host).
	Exempt []netip.Prefix
}

// Insight sizes the search-traffic summaries (internal/insight) and sets
// the beacon anomaly threshold.
type Insight struct {
	Names int // unresolved-name slots per summary
}

// Discovery is the periodic discovery ping.
type Discovery struct {
	// Interval between discovery pings to every addr_list destination;
	// 0: none but the one at start (search.discovery_at_start), after a
	// reload that changed the destinations, and POST /v1/discover.
	Interval time.Duration
}

// DNS is how the host names written in the address lists (pva.addr_list,
// pva.name_servers, static.servers, relay.to) are followed.
type DNS struct {
	// Refresh is the time between lookups of every name; 0: names are
	// resolved once, at load, as PVXS does.
	Refresh time.Duration
}

// Relay sends the sightings pvans accepted on to central pvans instances.
type Relay struct {
	// To are the central instances' search ports (host[:port], default
	// port pva.broadcast_port); empty: no relaying.
	To []Endpoint
	// ToBroadcast lets To name multicast and broadcast destinations: a
	// relay sends to central instances one by one, so such a destination
	// is a mistake unless the operator says it is not.
	ToBroadcast bool
	// Only is the relay profile (`pvans relay`): no TCP name server, no
	// answers to UDP searches, sightings only relayed, never listed here.
	Only bool
}

// HostNames are the host names written in the lists the daemon follows in
// DNS (Endpoint.Host), each once, in order.
func (c *Config) HostNames() []string {
	var out []string
	for _, l := range [][]Endpoint{c.PVA.AddrList, c.PVA.NameServerEntries, c.Static.ServerEntries, c.Relay.To} {
		for _, e := range l {
			if e.Host != "" && !slices.Contains(out, e.Host) {
				out = append(out, e.Host)
			}
		}
	}
	return out
}

// Defaults returns the production defaults: every setting's row in
// settings.go parsed from its default, and the probes connection profile,
// which has no setting.
func Defaults() Config {
	var c Config
	x := &loadCtx{resolve: func(host string) ([]netip.Addr, error) {
		return nil, fmt.Errorf("a default names the host %q; defaults are addresses", host)
	}}
	// Ports first, as in Load: list entries take their default port from them.
	for _, late := range []bool{false, true} {
		for _, s := range specs {
			if s.late != late {
				continue
			}
			if err := s.set(&c, x, raw{text: s.def, items: strings.Fields(s.def)}); err != nil {
				panic(fmt.Sprintf("config: the default of %s, %q: %v", s.key, s.def, err))
			}
		}
	}
	c.Probe.Conn = ConnProfile{
		MaxMessageBytes:  64 << 20,
		SendQueueBytes:   1 << 20,
		HandshakeTimeout: 10 * time.Second,
		MessageTimeout:   30 * time.Second,
	}
	return c
}

// Loopback returns the defaults confined to this host: listening,
// searching, discovery and beacons on 127.0.0.1 only, the automatic
// (broadcast) address lists off, the HTTP API on 127.0.0.1:9076, only
// servers on 127.0.0.0/8 believed, and no snapshot. It is what `pvans demo`
// runs with and what in-process tests start from: nothing it configures
// sends a packet off the host.
func Loopback(serverPort, broadcastPort uint16) Config {
	c := Defaults()
	lo := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	c.PVA.Interfaces = []netip.Addr{lo}
	c.PVA.ServerPort = serverPort
	c.PVA.BroadcastPort = broadcastPort
	c.PVA.AddrList = []Endpoint{EndpointOf(netip.AddrPortFrom(lo, broadcastPort))}
	c.PVA.AutoAddrList = false
	c.PVA.BeaconAddrList = []Endpoint{EndpointOf(netip.AddrPortFrom(lo, broadcastPort))}
	c.PVA.AutoBeaconAddrList = false
	c.HTTP.Listen = "127.0.0.1:9076"
	c.Snapshot.Path = ""
	c.Access.ServerAllow = []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{127, 0, 0, 0}), 8)}
	return c
}
