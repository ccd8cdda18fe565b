package config

import (
	"fmt"
	"time"
)

// beaconRows adds the beacon.* settings, beside each other so a part's settings
// are read together.
func beaconRows() {
	add(durSpec("beacon.expiry", "a server not heard from for this long is lost (PVXS: 360s)", time.Second, 0,
		func(c *Config) *time.Duration { return &c.Beacon.Expiry }),
		"360s", live("beacon tracker, next expiry check; a relay's next re-announce", "beacon", "relay"),
		"A server not heard from for this long is lost (PVXS: 360 s); a relay re-announces only the servers it heard within it.")
	add(spec{key: "beacon.check_interval", ptr: field(func(c *Config) *time.Duration { return &c.Beacon.CheckInterval }), usage: "how often beacon expiry is checked",
		set: durSet(func(c *Config) *time.Duration { return &c.Beacon.CheckInterval }),
		get: func(c *Config) string { return c.Beacon.CheckInterval.String() },
		check: func(c *Config) string {
			if c.Beacon.CheckInterval < 100*time.Millisecond {
				return "must be at least 100ms"
			}
			if c.Beacon.CheckInterval > c.Beacon.Expiry {
				return fmt.Sprintf("must not exceed beacon.expiry (%s)", c.Beacon.Expiry)
			}
			return ""
		}},
		"10s", live("beacon tracker, after the next check", "beacon"),
		"How often expiry is checked.")
}
