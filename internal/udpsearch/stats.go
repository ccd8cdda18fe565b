package udpsearch

import (
	"sync/atomic"

	"github.com/pvans-project/pvans/internal/answer"
)

// Stats is a snapshot of the counters. Drop counters name the reason a
// datagram (or the search in it) got no further.
type Stats struct {
	Datagrams      uint64 // received on the search port
	Searches       uint64 // CMD_SEARCH messages handled (including ones only forwarded)
	SearchNames    uint64 // names presented to the resolver
	Forwards       uint64 // unicast searches forwarded to the loopback group
	Responses      uint64 // CMD_SEARCH_RESPONSE messages sent
	Claims         uint64 // CIDs answered found=1
	DiscoveryPings uint64 // discovery pings answered
	Beacons        uint64 // CMD_BEACON received
	SearchReplies  uint64 // CMD_SEARCH_RESPONSE received (both sockets)
	DiscoveryPongs uint64 // of those, discovery replies given to the tracker
	BeaconsSent    uint64
	ClientSearches uint64 // datagrams sent by SendSearch (per destination)
	SendErrors     uint64
	KernelDrops    uint64 // SO_RXQ_OVFL: datagrams the kernel dropped for a full receive buffer
	// ClientKernelDrops is the same for the client socket (replies to
	// discovery pings and search-through searches).
	ClientKernelDrops uint64
	InterfaceReload   uint64

	DropMulticastSource  uint64 // source address is multicast (a forwarding safety rule)
	DropUnknownInterface uint64 // arrival interface not in the interface table
	DropTruncated        uint64 // datagram larger than the receive buffer
	DropMalformed        uint64 // bad header or undecodable message
	DropControl          uint64 // control or segmented message over UDP
	DropCommand          uint64 // a command the search port does not take
	DropTagNotForwarded  uint64 // origin tag not on loopback to the group (rule 1)
	DropSecondTag        uint64 // more than one origin tag (rule 2)
	DropTagForeign       uint64 // origin tag naming an address not on this host
	DropTagNotSearch     uint64 // origin tag followed by something other than a search
	DropForwardedZero    uint64 // forwarded search with all-zero reply address (rule 5)
	DropIgnored          uint64 // source in the ignore list
	DropReplyAddr        uint64 // reply port 0, or reply address multicast/broadcast/unspecified
	DropNotOurInterface  uint64 // reply would come from an address outside Options.Interfaces
	DropNoTCP            uint64 // search whose protocol list has no protocol pvans can answer
	DropDenied           uint64 // client or reply destination refused by the client access list
	DropRateLimited      uint64 // client over its search rate
	ReflectionCapped     uint64 // replies not sent: the destination's reflection budget was spent
	// RepliesHeld are replies paced to their client (Options.ReplyRate):
	// sent later, not at once. DropReplyQueue were not held for want of
	// room in the queue (Options.ReplyQueueBytes); DropReplyHold would
	// have waited beyond a second.
	RepliesHeld    uint64
	DropReplyQueue uint64
	DropReplyHold  uint64
	// RepliesOverTCP are answers to UDP searches sent over the client's
	// own TCP name-server connection (Options.Twins) instead;
	// RepliesDiverted, held or stashed replies moved there when the pair
	// was made; RepliesStashed, replies beyond the pace kept for a pair
	// that might come (those that found none count in DropReplyHold).
	RepliesOverTCP  uint64
	RepliesDiverted uint64
	RepliesStashed  uint64
	// RepliesPushed: search-through answers sent to a UDP searcher that
	// waited for them (PushAnswer), within its reflection budget.
	RepliesPushed uint64
	NamesDropped  uint64 // names beyond MaxNamesPerSearch
	// Claims not named, as over TCP (package answer): the server's
	// protocol is not one the client listed (ProtocolSkipped); the
	// registry had a zero address or port (ZeroEndpoint). And claims of a
	// server known by a loopback address named "any" to a client
	// elsewhere (LoopbackRewritten).
	ProtocolSkipped, ZeroEndpoint, LoopbackRewritten uint64
	// DropBeaconQueue: sightings (beacons, discovery answers) dropped
	// because the queue to the tracker was full.
	DropBeaconQueue uint64

	// Hints (beacons, discovery replies, search responses) not believed.
	HintAddressMismatch uint64 // names a server address other than its sender's, sender not a trusted relay
	HintNotAllowed      uint64 // sender or named server outside Options.ServerAllowed
	HintProtocol        uint64 // a protocol other than "tcp"/"tls", or a protocol string over pva.MaxProtocolLen
	HintRate            uint64 // beacon or discovery reply over its sender's rate
	HintUnsolicited     uint64 // positive search reply not on the client socket, or from a host pvans did not search
	HintInterface       uint64 // arrived on an interface outside Options.LearnFrom

	ForwardStats
}

type counters struct {
	datagrams, searches, searchNames, forwards, responses, discoveryPings, beacons      atomic.Uint64
	claims                                                                              atomic.Uint64
	searchReplies, discoveryPongs, beaconsSent, clientSearches, sendErrors, kernelDrops atomic.Uint64
	clientKernelDrops, kernelDrops6, clientKernelDrops6                                 atomic.Uint64
	interfaceReload                                                                     atomic.Uint64

	dropMulticastSource, dropUnknownInterface, dropTruncated, dropMalformed, dropControl atomic.Uint64
	dropCommand, dropTagNotForwarded, dropSecondTag, dropTagForeign, dropTagNotSearch    atomic.Uint64
	dropForwardedZero, dropIgnored, dropReplyAddr, dropNotOurInterface                   atomic.Uint64
	dropDenied, dropRateLimited, reflectionCapped, namesDropped                          atomic.Uint64
	dropBeaconQueue                                                                      atomic.Uint64
	repliesHeld, dropReplyQueue, dropReplyHold                                           atomic.Uint64
	repliesOverTCP, repliesDiverted, repliesStashed, repliesPushed                       atomic.Uint64

	hintAddress, hintNotAllowed, hintProtocol, hintRate, hintUnsolicited atomic.Uint64
	hintInterface                                                        atomic.Uint64

	fwdCounters
	// ans are the answer decision's (DropNoTCP is their NoProtocol).
	ans answer.Counters
}

func (c *counters) snapshot() Stats {
	return Stats{
		Datagrams: c.datagrams.Load(), Searches: c.searches.Load(), SearchNames: c.searchNames.Load(),
		Forwards: c.forwards.Load(), Responses: c.responses.Load(), Claims: c.claims.Load(), DiscoveryPings: c.discoveryPings.Load(),
		Beacons: c.beacons.Load(), SearchReplies: c.searchReplies.Load(), DiscoveryPongs: c.discoveryPongs.Load(),
		BeaconsSent: c.beaconsSent.Load(), ClientSearches: c.clientSearches.Load(), SendErrors: c.sendErrors.Load(),
		KernelDrops: c.kernelDrops.Load() + c.kernelDrops6.Load(), ClientKernelDrops: c.clientKernelDrops.Load() + c.clientKernelDrops6.Load(), InterfaceReload: c.interfaceReload.Load(),

		DropMulticastSource: c.dropMulticastSource.Load(), DropUnknownInterface: c.dropUnknownInterface.Load(),
		DropTruncated: c.dropTruncated.Load(), DropMalformed: c.dropMalformed.Load(), DropControl: c.dropControl.Load(),
		DropCommand: c.dropCommand.Load(), DropTagNotForwarded: c.dropTagNotForwarded.Load(),
		DropSecondTag: c.dropSecondTag.Load(), DropTagForeign: c.dropTagForeign.Load(),
		DropTagNotSearch: c.dropTagNotSearch.Load(), DropForwardedZero: c.dropForwardedZero.Load(),
		DropIgnored: c.dropIgnored.Load(), DropReplyAddr: c.dropReplyAddr.Load(),
		DropNotOurInterface: c.dropNotOurInterface.Load(), DropNoTCP: c.ans.NoProtocol.Load(),
		DropDenied: c.dropDenied.Load(), DropRateLimited: c.dropRateLimited.Load(),
		ReflectionCapped: c.reflectionCapped.Load(), NamesDropped: c.namesDropped.Load(),
		DropBeaconQueue: c.dropBeaconQueue.Load(),
		RepliesHeld:     c.repliesHeld.Load(), DropReplyQueue: c.dropReplyQueue.Load(), DropReplyHold: c.dropReplyHold.Load(),
		RepliesOverTCP: c.repliesOverTCP.Load(), RepliesDiverted: c.repliesDiverted.Load(), RepliesStashed: c.repliesStashed.Load(),
		RepliesPushed: c.repliesPushed.Load(), ProtocolSkipped: c.ans.ProtocolSkipped.Load(),
		ZeroEndpoint: c.ans.ZeroEndpoint.Load(), LoopbackRewritten: c.ans.LoopbackRewritten.Load(),

		HintAddressMismatch: c.hintAddress.Load(), HintNotAllowed: c.hintNotAllowed.Load(),
		HintProtocol: c.hintProtocol.Load(), HintRate: c.hintRate.Load(), HintUnsolicited: c.hintUnsolicited.Load(),
		HintInterface: c.hintInterface.Load(),
		ForwardStats:  c.fwdCounters.snapshot(),
	}
}
