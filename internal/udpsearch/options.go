package udpsearch

import (
	"math"
	"net/netip"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/addrmap"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/ratelimit"
	"github.com/pvans-project/pvans/internal/twin"
)

// Defaults for zero Options that are no setting of pvans: the protocol's
// port and the socket's own tuning. The settings (the receive buffer, the
// queues) are the daemon's to pass; a zero one means what its field says.
const (
	DefaultPort             = 5076 // EPICS_PVA_BROADCAST_PORT's (docs/protocol.md, "Constants")
	DefaultBatch            = 16
	DefaultInterfaceRefresh = 30 * time.Second
	maxDatagram             = 1 << 16
	// DefaultMaxNamesPerSearch bounds the names taken from one search.
	DefaultMaxNamesPerSearch = 4096
)

// ForwardGroup is the loopback multicast group unicast searches are
// forwarded to (docs/protocol.md, "Unicast forwarding").
var ForwardGroup = netip.AddrFrom4([4]byte{224, 0, 0, 128})

// Options configures a Server. Zero values mean the defaults noted. A
// field's tag names the setting the daemon builds it from
// (config.FillAtStart); a reload changes only the Policy and what
// SetDestinations, SetSendBeacons and SetReceiveBuffer set.
type Options struct {
	// Port is the search port (EPICS_PVAS_BROADCAST_PORT); 0 = 5076.
	Port uint16 `setting:"pva.broadcast_port"`
	// Interfaces (EPICS_PVAS_INTF_ADDR_LIST) restricts which local
	// addresses pvans answers from. As in PVXS the socket is always the
	// wildcard one; a search whose reply would come from an address not in
	// this list is still forwarded but not answered. Empty = all. What is
	// learned is limited by LearnFrom (the daemon gives it this list).
	Interfaces []netip.Addr
	// IgnoreAddrs (EPICS_PVAS_IGNORE_ADDR_LIST): searches from these
	// sources are not answered; port 0 matches any source port.
	IgnoreAddrs []netip.AddrPort

	// GUID and TCPPort are pvans's own identity: used for discovery
	// answers, negative MustReply answers and beacons. TCPPort is the
	// name-server port.
	GUID    pva.GUID
	TCPPort uint16 `setting:"pva.server_port"`
	// AddressMap rewrites the endpoint named to a client (NAT,
	// containers); the client is the reply destination. Nil names the
	// learned endpoint.
	AddressMap addrmap.Map
	// AnswerNames is the policy "answer UDP searches for registry names"
	// (each answer carries the real server's GUID and endpoint).
	AnswerNames bool

	// Groups are multicast groups the search port joins (on each one's
	// Iface, or the kernel's choice) to receive searches sent to them:
	// the multicast entries of EPICS_PVAS_INTF_ADDR_LIST. A search to a
	// group is answered from an address of the interface it arrived on.
	// IPv6 groups need IPv6.
	Groups []Destination
	// IPv6 opens the IPv6 sockets too: [::]:Port (IPV6_V6ONLY) beside the
	// IPv4 search port, and an IPv6 client socket on the IPv4 client
	// socket's port. IPv6 searches are answered directly from the address
	// they were sent to (PVXS forwards only IPv4 unicast searches, over
	// 224.0.0.128 on loopback); IPv6 beacons and replies are heard; IPv6
	// destinations in AddrList and BeaconAddrList are sent to. A host
	// without IPv6 runs IPv4 only, with a warning.
	IPv6 bool

	// ReceiveBuffer is SO_RCVBUF (SO_RCVBUFFORCE when permitted); 0 keeps
	// the OS default.
	ReceiveBuffer int `setting:"udp.receive_buffer_bytes"`
	// Batch is how many datagrams one receive call may return; 0 = 16.
	Batch int

	// AddrList (EPICS_PVA_ADDR_LIST) is where SendSearch sends. Nothing
	// is computed automatically; see AutoAddrList.
	AddrList []Destination
	// SendBeacons turns on pvans's own beacons to BeaconAddrList.
	SendBeacons    bool `setting:"udp.send_beacons"`
	BeaconAddrList []Destination

	Resolver Resolver   // nil: no names are held
	Beacons  BeaconSink // nil: sightings are dropped
	// BeaconQueue bounds the sightings waiting for Beacons: they are
	// handed over by a goroutine of their own, so a slow tracker never
	// delays a search answer. Beyond it sightings are dropped (counted).
	// 0 = no queue: a sighting is handed over only while the tracker
	// waits for one.
	BeaconQueue int
	// OnSearchResponse receives every CMD_SEARCH_RESPONSE (on the search
	// port or the client socket). m and its slices are only valid during
	// the call. May be called from two goroutines at once.
	OnSearchResponse func(from netip.AddrPort, m *pva.SearchResponse)
	// OnPingAnswer is offered every discovery answer (no names) on the
	// client socket first: a pvAccessCPP server answers a ping pvans sent
	// over TCP there. It returns true if it took the answer. m is only
	// valid during the call.
	OnPingAnswer func(from netip.AddrPort, m *pva.SearchResponse) bool
	// OnDiscoveryPing is told of every discovery ping (a search with no
	// names) that passed the access rules and the rate limit, answered or
	// not (Silent), with the datagram's source: a relay re-announces to a
	// central instance that pings it. Not for a ping forwarded by another
	// socket of the host (its source is the forwarder). Nil: not told.
	OnDiscoveryPing func(from netip.AddrPort)
	// Insight sees every search answered from the resolver (nil: none).
	Insight SearchObserver
	// Twins pairs a client's UDP search socket with its own TCP
	// name-server connection (the TCP server's table); a paired client's
	// searches are answered over the connection (nil: never).
	Twins *twin.Table

	// Clock drives beacons and interface refreshes; nil = the wall clock.
	Clock clock.Clock
	// ListInterfaces reads the host's interfaces; nil = ReadInterfaces.
	// Tests in a network namespace inject one that runs in it.
	ListInterfaces func() ([]Interface, error)
	// InterfaceRefresh is how often the interface table is re-read (it is
	// also re-read, at most once a second, when a datagram arrives on an
	// unknown interface); 0 = 30 s, negative = never.
	InterfaceRefresh time.Duration

	// ClientAllowed is the client access list. A search is dropped
	// (counted, logged at debug) when it refuses the client (the datagram
	// source, or for a forwarded search the client named in it) or the
	// reply destination. Nil allows everyone.
	ClientAllowed func(netip.Addr) bool
	// SearchRate and SearchBurst limit the searches answered per second
	// per client address (discovery pings included); beyond them searches
	// are dropped and counted. SearchRate 0 = unlimited. A unicast search
	// dropped by the rate, the ignore list or the client access list is
	// not forwarded to the loopback group either.
	SearchRate  float64
	SearchBurst int
	// NameRate and NameBurst are a second budget per client address, in
	// names: a search costs one token per name it carries (after
	// MaxNamesPerSearch), and is dropped, like one over SearchRate, when
	// the client's budget holds fewer. It bounds the lookups one source
	// can ask for however it packs them, with a burst that can cover a
	// big client's start-up (a PVXS client searches every new channel in
	// one tick of its ring). NameRate 0 = unlimited.
	NameRate  float64
	NameBurst int
	// ReflectionRatio caps the reply bytes sent to an address at this
	// multiple of the search bytes whose replies go to it, received within
	// ReflectionWindow: pvans never amplifies a spoofed search by more
	// than the ratio. 0 = no cap; ReflectionWindow 0 = no window.
	ReflectionRatio  float64
	ReflectionWindow time.Duration
	// ReplyRate paces the replies to one client (address and port) in the
	// names they answer (a negative reply counts one): replies for
	// ReplyBurst names go at once, then ReplyRate names a second, the rest
	// held in a queue of ReplyQueueBytes (0 = no bound) and
	// sent when due, so a big client's start-up burst does not overflow
	// its receive buffer. ReplyRate 0 = no pacing.
	ReplyRate       float64 `setting:"udp.client_reply_names_per_second"`
	ReplyBurst      int
	ReplyQueueBytes int
	// LimitExempt addresses are neither rate limited nor capped.
	LimitExempt []netip.Prefix
	// RateSources bounds the addresses each limiter remembers; 0 = 65536.
	RateSources int
	// MaxNamesPerSearch bounds the names taken from one search; extras
	// are dropped and counted. 0 = 4096, negative = no bound.
	MaxNamesPerSearch int
	// PortPeerCheck is how old the count of other sockets on the search
	// port may be when a unicast search needs it (forward.go): unicast
	// searches are forwarded to the loopback group only while some other
	// socket shares the port. 0 = DefaultPortPeerCheck; negative = always
	// forward, never count.
	PortPeerCheck time.Duration
	// Logger receives debug lines for refused clients, and warnings for
	// multicast destinations naming an unknown interface; nil = none.
	Logger *zap.Logger

	// Hints: beacons and search responses name a server; they are
	// believed (handed to Beacons / OnSearchResponse) only as below, and
	// every drop is counted by reason (Stats.Hint*).
	//
	// ServerAllowed (access.server_allow) must admit both the sender and
	// the server address the datagram names; nil admits all.
	ServerAllowed func(netip.Addr) bool
	// TrustedRelays are senders whose datagrams may name a server address
	// other than their own (gateways, relays). Anyone else must send from
	// the address it names, or name "any" (then its own address is meant,
	// as PVXS reads it).
	TrustedRelays []netip.Prefix
	// BeaconRate and BeaconBurst limit beacons and discovery replies per
	// second per sender address; 0 = unlimited.
	BeaconRate  float64
	BeaconBurst int
	// LearnFrom are the local addresses whose interfaces hints are taken
	// from (the networks pvans serves); nil takes them from every
	// interface. The interface a datagram arrived on decides, never its
	// sender's address, which can be forged: a hint arriving on another
	// interface is dropped (Stats.HintInterface). A datagram from a local
	// process (it arrives on loopback) counts as arriving on the interface
	// owning the address it was sent to, or, sent to a loopback address or
	// group, on loopback, taken when a loopback address is listed.
	LearnFrom []netip.Addr
}

// Policy is the part of the Options a running server can change (a
// configuration reload): who is answered, how much, and with what. Each
// tag names the setting the field takes (config.Fill).
type Policy struct {
	ClientAllowed func(netip.Addr) bool
	IgnoreAddrs   []netip.AddrPort `setting:"pva.ignore_addr_list"`
	AnswerNames   bool
	// AnswerOverTCP answers a client paired with its TCP name-server
	// connection (Options.Twins) over that connection.
	AnswerOverTCP bool `setting:"udp.answer_over_tcp"`
	// Silent answers no search at all, discovery pings included (the
	// relay profile: it has no name server whose port an answer would
	// name); unicast searches are still forwarded to the host's others.
	Silent            bool
	SearchRate        float64 `setting:"rate_limit.udp_searches_per_second"`
	SearchBurst       int
	NameRate          float64 `setting:"rate_limit.udp_names_per_second"`
	NameBurst         int
	ReflectionRatio   float64
	ReflectionWindow  time.Duration
	LimitExempt       []netip.Prefix `setting:"rate_limit.exempt"`
	RateSources       int
	MaxNamesPerSearch int
	AddressMap        addrmap.Map `setting:"map.rules"`
	// Hints (the trust rule): see Options.ServerAllowed and the fields after it.
	ServerAllowed func(netip.Addr) bool
	TrustedRelays []netip.Prefix `setting:"access.trusted_relays"`
	BeaconRate    float64        `setting:"rate_limit.beacons_per_second"`
	BeaconBurst   int
	LearnFrom     []netip.Addr
}

func (o *Options) policy() Policy {
	return Policy{ClientAllowed: o.ClientAllowed, IgnoreAddrs: o.IgnoreAddrs, AnswerNames: o.AnswerNames,
		SearchRate: o.SearchRate, SearchBurst: o.SearchBurst, NameRate: o.NameRate, NameBurst: o.NameBurst, ReflectionRatio: o.ReflectionRatio,
		ReflectionWindow: o.ReflectionWindow, LimitExempt: o.LimitExempt, RateSources: o.RateSources,
		MaxNamesPerSearch: o.MaxNamesPerSearch, AddressMap: o.AddressMap,
		ServerAllowed: o.ServerAllowed, TrustedRelays: o.TrustedRelays, BeaconRate: o.BeaconRate, BeaconBurst: o.BeaconBurst,
		LearnFrom: o.LearnFrom}
}

// policy is a Policy in force with its limiters.
type policy struct {
	Policy
	limit   *ratelimit.Limiter    // searches per client; nil: unlimited
	names   *ratelimit.Limiter    // names searched per client; nil: unlimited
	refl    *ratelimit.Reflection // reply bytes per destination; nil: no cap
	beacons *ratelimit.Limiter    // beacons and discovery replies per sender; nil: unlimited
	// relayed is the same budget for a trusted relay's sightings, per
	// server named: a table of its own, so a datagram forged from a
	// relay's address spends only the relayed budget of the host it
	// names, never the budget of that host's own beacons.
	relayed *ratelimit.Limiter
	// repeats: the names each busy client searched lately (admit); kept
	// across reloads.
	repeats *ratelimit.Recent
	// learn is LearnFrom as a set (nil: every interface); learnLoopback
	// says it holds a loopback address.
	learn         map[netip.Addr]bool
	learnLoopback bool
}

// newPolicy builds p's limiters, keeping cur's when their settings did
// not change (so a reload of something else does not refill every
// source's burst). The repeat memory, made once, counts its evictions
// into evicted.
func newPolicy(p Policy, cur *policy, clk clock.Clock, evicted *metrics.Counter) *policy {
	if p.MaxNamesPerSearch == 0 {
		p.MaxNamesPerSearch = DefaultMaxNamesPerSearch
	}
	n := &policy{Policy: p}
	if p.LearnFrom != nil {
		n.learn = make(map[netip.Addr]bool, len(p.LearnFrom))
		for _, a := range p.LearnFrom {
			a = a.Unmap()
			n.learn[a] = true
			n.learnLoopback = n.learnLoopback || a.IsLoopback()
		}
	}
	sameSources := cur != nil && cur.RateSources == p.RateSources && slices.Equal(cur.LimitExempt, p.LimitExempt)
	if sameSources && cur.SearchRate == p.SearchRate && cur.SearchBurst == p.SearchBurst {
		n.limit = cur.limit
	} else {
		n.limit = ratelimit.New(ratelimit.Options{Rate: p.SearchRate, Burst: p.SearchBurst,
			Sources: p.RateSources, Exempt: p.LimitExempt, Clock: clk})
	}
	if sameSources && cur.NameRate == p.NameRate && cur.NameBurst == p.NameBurst {
		n.names = cur.names
	} else {
		n.names = ratelimit.New(ratelimit.Options{Rate: p.NameRate, Burst: p.NameBurst,
			Sources: p.RateSources, Exempt: p.LimitExempt, Clock: clk})
	}
	if sameSources && cur.BeaconRate == p.BeaconRate && cur.BeaconBurst == p.BeaconBurst {
		n.beacons, n.relayed = cur.beacons, cur.relayed
	} else {
		n.beacons = ratelimit.New(ratelimit.Options{Rate: p.BeaconRate, Burst: p.BeaconBurst,
			Sources: p.RateSources, Exempt: p.LimitExempt, Clock: clk})
		n.relayed = ratelimit.New(ratelimit.Options{Rate: p.BeaconRate, Burst: p.BeaconBurst,
			Sources: p.RateSources, Exempt: p.LimitExempt, Clock: clk})
	}
	if cur != nil {
		n.repeats = cur.repeats
	} else {
		n.repeats = ratelimit.NewRecent(clk, evicted)
	}
	if sameSources && cur.ReflectionRatio == p.ReflectionRatio && cur.ReflectionWindow == p.ReflectionWindow {
		n.refl = cur.refl
	} else {
		n.refl = ratelimit.NewReflection(ratelimit.ReflectionOptions{Ratio: p.ReflectionRatio,
			Window: p.ReflectionWindow, Sources: p.RateSources, Exempt: p.LimitExempt, Clock: clk})
	}
	return n
}

func (o *Options) setDefaults() {
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.ReplyQueueBytes <= 0 {
		o.ReplyQueueBytes = math.MaxInt
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.ListInterfaces == nil {
		o.ListInterfaces = ReadInterfaces
	}
	if o.InterfaceRefresh == 0 {
		o.InterfaceRefresh = DefaultInterfaceRefresh
	}
	if o.MaxNamesPerSearch == 0 {
		o.MaxNamesPerSearch = DefaultMaxNamesPerSearch
	}
	if o.PortPeerCheck == 0 {
		o.PortPeerCheck = DefaultPortPeerCheck
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}
