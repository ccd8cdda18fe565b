package config

import (
	"net/netip"
)

// rateLimitRows adds the rate_limit.* settings, beside each other so a part's settings
// are read together.
func rateLimitRows() {
	add(floatSpec("rate_limit.udp_searches_per_second", "UDP search datagrams handled per source address per second; 0 = unlimited", 0, 1e9,
		func(c *Config) *float64 { return &c.RateLimit.UDPSearchesPerSecond }),
		"1000", live("UDP policy: a new limiter, every source with a full burst", "udp"),
		"UDP search datagrams handled per source address per second; 0 = no limit. A source may send 10 seconds' worth at once above it (udpsearch.BurstSeconds: a PVXS client searches every new channel at once).")
	add(floatSpec("rate_limit.udp_names_per_second", "names in UDP searches handled per source address per second; 0 = unlimited", 0, 1e9,
		func(c *Config) *float64 { return &c.RateLimit.UDPNamesPerSecond }),
		"40000", live("UDP policy: a new name budget, every source with a full burst", "udp"),
		"Names in UDP searches handled per source address per second, however they are packed; 0 = no limit. A source may search 10 seconds' worth at once above it (a big client searches all its channels at start).")
	add(floatSpec("rate_limit.tcp_messages_per_second", "TCP messages handled per source address per second; 0 = unlimited", 0, 1e9,
		func(c *Config) *float64 { return &c.RateLimit.TCPMessagesPerSecond }),
		"1000", live("TCP policy: a new limiter, every source with a full burst", "tcp"),
		"TCP messages handled per source address per second; 0 = no limit. A source may send 2 seconds' worth at once above it (tcpsearch.BurstSeconds).")
	// A host of 200 IOCs starting at once sends 200 first beacons; steady
	// state is one per IOC per 15 s (fast) or 180 s.
	add(floatSpec("rate_limit.beacons_per_second", "beacons and discovery replies taken per sender address per second; 0 = unlimited", 0, 1e9,
		func(c *Config) *float64 { return &c.RateLimit.BeaconsPerSecond }),
		"20", live("UDP policy: a new beacon limiter", "udp"),
		"Beacons and discovery replies taken per sender address per second; 0 = no limit. A sender may send 10 seconds' worth at once above it (a host of 200 IOCs starting together).")
	add(prefixSpec("rate_limit.exempt", "source addresses (CIDR) exempt from every rate and reflection limit",
		func(c *Config) *[]netip.Prefix { return &c.RateLimit.Exempt }),
		"", live("TCP and UDP policies: new limiters", "tcp", "udp"),
		"Source addresses (CIDR) exempt from every rate and reflection limit, e.g. a trusted gateway that speaks for many clients.")
}
