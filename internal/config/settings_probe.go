package config

import (
	"time"
)

// probeRows adds the probe.* settings, beside each other so a part's settings
// are read together.
func probeRows() {
	add(durSpec("probe.reprobe_interval", "time between listings of a watched server", time.Second, 0,
		func(c *Config) *time.Duration { return &c.Probe.ReprobeInterval }),
		"5m", live("prober, next schedule", "probe"),
		"Time between listings of a server that is being watched.")
}
