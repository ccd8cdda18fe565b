package config

import (
	"time"
)

// discoveryRows adds the discovery.* settings, beside each other so a part's settings
// are read together.
func discoveryRows() {
	// On by default: a server that sends no beacons (the Phoebus Java
	// server), or one across a router, that starts after pvans is found
	// within a minute rather than only when a client asks for one of its
	// names. A round costs one datagram per addr_list destination and one
	// reply per server there (about 70 B): 1,000 servers answer 70 kB a
	// minute. Under beacon.expiry (360 s) with room for a lost reply or
	// two, so a server heard only this way stays tracked.
	add(spec{key: "discovery.interval", ptr: field(func(c *Config) *time.Duration { return &c.Discovery.Interval }), usage: "time between discovery pings to every addr_list destination (servers there answer and are listed over TCP); 0: only at start, after a reload that changed the destinations and on POST /v1/discover",
		set: durSet(func(c *Config) *time.Duration { return &c.Discovery.Interval }),
		get: func(c *Config) string { return c.Discovery.Interval.String() },
		check: func(c *Config) string {
			if d := c.Discovery.Interval; d != 0 && d < time.Second {
				return "must be 0 (off) or at least 1s"
			}
			return ""
		}},
		"60s", live("periodic discovery: the next ping is due one new interval after the reload (0 stops them)", "discovery"),
		"Time between discovery pings to every pva.addr_list destination, so a server that sends no beacons (the Phoebus Java server) or starts where its beacons do not reach pvans (across a router) is found within one interval and listed (or watched) over TCP. Each round is one datagram per destination and one reply per server there. 0 = only at start, after a reload that changed addr_list, and on POST /v1/discover (as EPICS servers and clients behave). See docs/operations.md, \"Servers\" and \"Reaching IOCs on other networks\".")
}
