package config

import (
	"time"
)

// dnsRows adds the dns.* settings, beside each other so a part's settings
// are read together.
func dnsRows() {
	// Kubernetes restarts a pod under a new address; 30 s is what a client
	// waits before it searches again anyway.
	add(spec{key: "dns.refresh", ptr: field(func(c *Config) *time.Duration { return &c.DNS.Refresh }), usage: "time between lookups of the host names in pva.addr_list, pva.name_servers, static.servers and relay.to (all A and AAAA records); 0: resolved once, at load",
		set: durSet(func(c *Config) *time.Duration { return &c.DNS.Refresh }),
		get: func(c *Config) string { return c.DNS.Refresh.String() },
		check: func(c *Config) string {
			if d := c.DNS.Refresh; d != 0 && d < time.Second {
				return "must be 0 (off) or at least 1s"
			}
			return ""
		}},
		"30s", live("DNS following: a round at once, then every new interval (0: none after it)", "dns"),
		"Host names in pva.addr_list, pva.name_servers, static.servers and relay.to are resolved again this often, with all their A and AAAA records (a restarted Kubernetes pod has a new address). 0 = once, at load.")
}
