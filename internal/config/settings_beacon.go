package config

import (
	"time"
)

// beaconRows adds the beacon.* settings, beside each other so a part's settings
// are read together.
func beaconRows() {
	add(durSpec("beacon.expiry", "a server not heard from for this long is lost (PVXS: 360s)", time.Second, 0,
		func(c *Config) *time.Duration { return &c.Beacon.Expiry }),
		"360s", live("beacon tracker, next expiry check; a relay's next re-announce", "beacon", "relay"),
		"A server not heard from for this long is lost (PVXS: 360 s), checked every 10 s (or a quarter of it when shorter); a relay re-announces only the servers it heard within it.")
}
