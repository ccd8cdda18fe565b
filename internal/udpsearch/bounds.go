package udpsearch

import "time"

// The bounds the daemon gives the UDP side (issue 40: constants, not
// settings; docs/SECURITY.md, "Bounds").
const (
	// BurstSeconds: a source may send this many seconds of its rate at
	// once (rate_limit.udp_searches_per_second, udp_names_per_second,
	// beacons_per_second): a PVXS client searches every new channel at
	// once (100,000 names are ~2,700 datagrams, within 10,000 datagrams
	// and 400,000 names at the defaults), and a host of 200 IOCs starting
	// together sends 200 first beacons (20/s).
	BurstSeconds = 10
	// DefaultBeaconQueue: beacons and discovery answers waiting for the
	// server tracker (a queue, so the search port never waits for the
	// registry); beyond it they are dropped and counted
	// (pvans_udp_drops_total{reason="beacon_queue"}).
	DefaultBeaconQueue = 4096
	// DefaultReplyBurst: names answered to one client socket at once
	// before replies are paced (udp.client_reply_names_per_second).
	DefaultReplyBurst = 4096
	// DefaultReplyQueueBytes: paced replies held over all clients; beyond
	// it they are dropped (pvans_udp_drops_total{reason="reply_queue"}).
	DefaultReplyQueueBytes = 4 << 20
	// DefaultReflectionRatio and DefaultReflectionWindow: the UDP reply
	// bytes sent to one address within the window are at most this
	// multiple of the search bytes it sent (docs/SECURITY.md,
	// "Reflection"), so a spoofed search is never amplified more than
	// 4×. A real client's search of one name (~60 B) is answered in ~90
	// B; a ratio under ~2 would cut honest answers, and a site's gateway
	// that needs more goes in rate_limit.exempt.
	DefaultReflectionRatio  = 4
	DefaultReflectionWindow = 10 * time.Second
)
