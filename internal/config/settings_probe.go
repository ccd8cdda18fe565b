package config

import (
	"fmt"
	"time"
)

// probeRows adds the probe.* settings, beside each other so a part's settings
// are read together.
func probeRows() {
	add(intSpec("probe.concurrency", "servers listed at the same time", 1, 4096,
		func(c *Config) *int { return &c.Probe.Concurrency }),
		"16", live("prober, probes started from then on", "probe"),
		"Servers listed at the same time...")
	add(intSpec("probe.per_host_concurrency", "servers of one IP address listed at the same time (its share of probe.concurrency)", 1, 4096,
		func(c *Config) *int { return &c.Probe.PerHostConcurrency }),
		"4", live("prober, probes started from then on", "probe"),
		"...and of them, servers of one IP address (its share of the pool).")
	add(durSpec("probe.reprobe_interval", "time between listings of a watched server", time.Second, 0,
		func(c *Config) *time.Duration { return &c.Probe.ReprobeInterval }),
		"5m", live("prober, next schedule", "probe"),
		"Time between listings of a server that is being watched.")
	add(durSpec("probe.backoff_min", "first retry delay after a failed probe", 10*time.Millisecond, 0,
		func(c *Config) *time.Duration { return &c.Probe.BackoffMin }),
		"1s", live("prober, next schedule", "probe"),
		"Retry delay after a failed probe starts here and doubles...")
	add(spec{key: "probe.backoff_max", ptr: field(func(c *Config) *time.Duration { return &c.Probe.BackoffMax }), usage: "longest retry delay after failed probes",
		set: durSet(func(c *Config) *time.Duration { return &c.Probe.BackoffMax }),
		get: func(c *Config) string { return c.Probe.BackoffMax.String() },
		check: func(c *Config) string {
			if c.Probe.BackoffMax < c.Probe.BackoffMin {
				return fmt.Sprintf("must not be less than probe.backoff_min (%s)", c.Probe.BackoffMin)
			}
			return ""
		}},
		"5m", live("prober, next schedule", "probe"),
		"...up to this.")
	add(spec{key: "probe.echo_interval", ptr: field(func(c *Config) *time.Duration { return &c.Probe.EchoInterval }), usage: "ECHO period on probe connections; peers drop silent clients after their tcpTimeout (40 s)",
		set: durSet(func(c *Config) *time.Duration { return &c.Probe.EchoInterval }),
		get: func(c *Config) string { return c.Probe.EchoInterval.String() },
		check: func(c *Config) string {
			if d := c.Probe.EchoInterval; d < time.Second || d > 30*time.Second {
				return "must be between 1s and 30s (PVXS peers drop a client silent for 40s)"
			}
			return ""
		}},
		"15s", live("prober, watch connections opened from then on", "probe"),
		"ECHO period on probe connections (servers drop silent clients at 40 s).")
	add(durSpec("probe.timeout", "time allowed to connect to a server and list its names", 100*time.Millisecond, 0,
		func(c *Config) *time.Duration { return &c.Probe.Timeout }),
		"30s", live("prober, next attempt", "probe"),
		"Time allowed to connect to a server and list its names.")
	add(intSpec("probe.search_through_retries", "failed probes after which an endpoint known only from search replies is forgotten", 1, 1000,
		func(c *Config) *int { return &c.Probe.ThroughRetries }),
		"4", live("prober, next failed probe", "probe"),
		"Endpoints known only from search replies (anyone can name any endpoint in one) are forgotten after this many failed probes in a row...")
	add(intSpec("probe.search_through_max", "endpoints known only from search replies probed at most (and search-through answers being checked over TCP); beyond it new ones are dropped (counted)", 1, 10_000_000,
		func(c *Config) *int { return &c.Probe.ThroughMax }),
		"1024", live("prober, next search reply naming a new endpoint", "probe"),
		"...and at most this many are probed; replies naming more are dropped (pvans_probe_search_through_dropped_total).")
	add(durSpec("probe.first_timeout", "probe.timeout for the first attempt at a server never listed (at most probe.timeout; retries get probe.timeout)", 100*time.Millisecond, 0,
		func(c *Config) *time.Duration { return &c.Probe.FirstTimeout }),
		"5s", live("prober, next attempt", "probe"),
		"The timeout of the first attempt at a server never listed (retries get probe.timeout), so a server that holds the connection silent does not hold a probe slot for long.")
}
