package config

import (
	"time"
)

// probeRows adds the probe.* settings, beside each other so a part's settings
// are read together.
func probeRows() {
	add(intSpec("probe.concurrency", "servers listed at the same time", 1, 4096,
		func(c *Config) *int { return &c.Probe.Concurrency }),
		"16", live("prober, probes started from then on", "probe"),
		"Servers listed at the same time (at most 4 of one IP address, probe.DefaultPerHostConcurrency).")
	add(durSpec("probe.reprobe_interval", "time between listings of a watched server", time.Second, 0,
		func(c *Config) *time.Duration { return &c.Probe.ReprobeInterval }),
		"5m", live("prober, next schedule", "probe"),
		"Time between listings of a server that is being watched.")
	add(durSpec("probe.backoff_min", "first retry delay after a failed probe", 10*time.Millisecond, 0,
		func(c *Config) *time.Duration { return &c.Probe.BackoffMin }),
		"1s", live("prober, next schedule", "probe"),
		"Retry delay after a failed probe starts here and doubles (±20 %) up to 5 minutes (probe.DefaultBackoffMax).")
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
		"Time allowed to connect to a server and list its names (a server never listed gets at most 5 s, probe.DefaultFirstTimeout, at its first attempt).")
}
