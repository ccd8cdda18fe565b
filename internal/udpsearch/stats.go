package udpsearch

import (
	"sync/atomic"

	"github.com/pvans-project/pvans/internal/answer"
	"github.com/pvans-project/pvans/internal/metrics"
)

// counters are the search port's, each declared once, beside its field
// (metrics.Register). Drop counters name the reason a datagram (or the
// search in it) got no further. The plain atomics are not exported:
// tests read them.
type counters struct {
	searches       metrics.Counter `metric:"pvans_udp_searches_total" help:"CMD_SEARCH messages received on the search port."` // including ones only forwarded
	searchNames    metrics.Counter `metric:"pvans_udp_search_names_total" help:"Names in UDP searches presented to the resolver."`
	claims         metrics.Counter `metric:"pvans_udp_claims_total" help:"Names answered found to UDP searches."`
	responses      metrics.Counter `metric:"pvans_udp_replies_total" help:"CMD_SEARCH_RESPONSE messages sent over UDP."`
	forwards       metrics.Counter `metric:"pvans_udp_forwards_total" help:"Unicast searches forwarded to the loopback multicast group."`
	beacons        metrics.Counter `metric:"pvans_beacons_total" label:"via=beacon" help:"Server sightings received."`
	discoveryPongs metrics.Counter `metric:"pvans_beacons_total" label:"via=discovery"` // discovery replies given to the tracker
	// repliesHeld are replies paced to their client (Options.ReplyRate):
	// sent later, not at once. dropReplyQueue were not held for want of
	// room in the queue (Options.ReplyQueueBytes); dropReplyHold would
	// have waited beyond a second.
	repliesHeld metrics.Counter `metric:"pvans_udp_replies_paced_total" help:"UDP replies held to keep to their client's pace (udp.client_reply_names_per_second), sent when due."`
	// repliesOverTCP are answers to UDP searches sent over the client's
	// own TCP name-server connection (Options.Twins) instead;
	// repliesDiverted, held or stashed replies moved there when the pair
	// was made; repliesStashed, replies beyond the pace kept for a pair
	// that might come (those that found none count in dropReplyHold).
	repliesOverTCP  metrics.Counter `metric:"pvans_udp_replies_over_tcp_total" help:"Answers to UDP searches sent over the client's own TCP name-server connection instead of UDP (a paired client)."`
	repliesDiverted metrics.Counter `metric:"pvans_udp_replies_diverted_total" help:"Paced or stashed UDP replies sent over the client's own TCP connection when it was paired."`
	repliesStashed  metrics.Counter `metric:"pvans_udp_replies_stashed_total" help:"UDP replies beyond the client's pace kept (not sent) for a TCP pairing that might come; those that find none count as drops, reason reply_hold."`
	// repliesPushed: search-through answers sent to a UDP searcher that
	// waited for them (PushAnswer), within its reflection budget.
	repliesPushed metrics.Counter `metric:"pvans_udp_replies_pushed_total" help:"Search-through answers sent over UDP to a client that searched only over UDP, without waiting for its next search (within its reflection budget)."`

	// kernelDrops: SO_RXQ_OVFL, datagrams the kernel dropped for a full
	// receive buffer (both families); clientKernelDrops, the same for the
	// client sockets (replies to discovery pings and search-through).
	kernelDrops          metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=rx_overflow" help:"Datagrams dropped on the search port, by reason."`
	clientKernelDrops    metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=client_rx_overflow"`
	dropMulticastSource  metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=multicast_source"`   // source address is multicast (a forwarding safety rule)
	dropUnknownInterface metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=unknown_interface"`  // arrival interface not in the interface table
	dropTruncated        metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=truncated"`          // datagram larger than the receive buffer
	dropMalformed        metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=malformed"`          // bad header or undecodable message
	dropControl          metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=control"`            // control or segmented message over UDP
	dropCommand          metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=command"`            // a command the search port does not take
	dropTagNotForwarded  metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=tag_not_forwarded"`  // origin tag not on loopback to the group (rule 1)
	dropSecondTag        metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=second_tag"`         // more than one origin tag (rule 2)
	dropTagForeign       metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=tag_foreign"`        // origin tag naming an address not on this host
	dropTagNotSearch     metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=tag_not_search"`     // origin tag followed by something other than a search
	dropForwardedZero    metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=forwarded_zero"`     // forwarded search with all-zero reply address (rule 5)
	dropIgnored          metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=ignored_source"`     // source in the ignore list
	dropReplyAddr        metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=bad_reply_address"`  // reply port 0, or reply address multicast/broadcast/unspecified
	dropNotOurInterface  metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=not_our_interface"`  // reply would come from an address outside Options.Interfaces
	dropNoTCP            metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=no_usable_protocol"` // no protocol pvans can answer listed (answer.Counters.NoProtocol)
	dropRateLimited      metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=rate_limited"`       // client over its search rate
	reflectionCapped     metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=reflection_capped"`  // replies not sent: the destination's reflection budget was spent
	dropBeaconQueue      metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=beacon_queue"`       // sightings dropped: the queue to the tracker was full
	dropReplyQueue       metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=reply_queue"`
	dropReplyHold        metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=reply_hold"`
	dropDenied           metrics.Counter `metric:"pvans_access_denied_total" label:"what=udp_client"` // client or reply destination refused by the client access list

	// Names the repeat memory forgot early to stay within its bound
	// (ratelimit.Recent).
	repeatsEvicted metrics.Counter `metric:"pvans_repeat_names_evicted_total" label:"via=udp"`

	// Hints (beacons, discovery replies, search responses) not believed.
	hintAddress     metrics.Counter `metric:"pvans_hints_dropped_total" label:"reason=address_mismatch"`   // names a server address other than its sender's, sender not a trusted relay
	hintNotAllowed  metrics.Counter `metric:"pvans_hints_dropped_total" label:"reason=sender_not_allowed"` // sender or named server outside Options.ServerAllowed
	hintProtocol    metrics.Counter `metric:"pvans_hints_dropped_total" label:"reason=protocol"`           // a protocol other than "tcp"/"tls", or a protocol string over pva.MaxProtocolLen
	hintRate        metrics.Counter `metric:"pvans_hints_dropped_total" label:"reason=rate"`               // beacon or discovery reply over its sender's rate
	hintUnsolicited metrics.Counter `metric:"pvans_hints_dropped_total" label:"reason=unsolicited"`        // positive search reply not on the client socket, or from a host pvans did not search
	hintInterface   metrics.Counter `metric:"pvans_hints_dropped_total" label:"reason=interface"`          // arrived on an interface outside Options.LearnFrom

	// Claims not named, as over TCP (answer.Counters): the server's
	// protocol is not one the client listed; the registry had a zero
	// address or port. And claims of a server known by a loopback address
	// named "any" to a client elsewhere.
	protoSkipped      metrics.Counter `metric:"pvans_udp_claims_withheld_total" label:"reason=protocol" help:"Claims not named to a UDP client, by reason: protocol (the server's protocol is not one the search listed), zero_endpoint (the registry had a zero address or port)."`
	zeroEndpoint      metrics.Counter `metric:"pvans_udp_claims_withheld_total" label:"reason=zero_endpoint"`
	loopbackRewritten metrics.Counter `metric:"pvans_udp_claims_loopback_rewritten_total" help:"Claims of a server known by a loopback address named \"any\" to a UDP client on another host (the client connects to where the answer came from)."`

	datagrams       atomic.Uint64 // received on the search port
	discoveryPings  atomic.Uint64 // discovery pings answered
	searchReplies   atomic.Uint64 // CMD_SEARCH_RESPONSE received (both sockets)
	beaconsSent     atomic.Uint64
	clientSearches  atomic.Uint64 // datagrams sent by SendSearch (per destination)
	sendErrors      atomic.Uint64
	namesDropped    atomic.Uint64 // names beyond MaxNamesPerSearch
	interfaceReload atomic.Uint64

	fwdCounters
}

// answer points the answer decision's counts at the port's counters.
func (c *counters) answer() answer.Counters {
	return answer.Counters{NoProtocol: &c.dropNoTCP, ProtocolSkipped: &c.protoSkipped,
		ZeroEndpoint: &c.zeroEndpoint, LoopbackRewritten: &c.loopbackRewritten}
}
