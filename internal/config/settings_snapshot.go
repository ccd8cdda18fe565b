package config

import (
	"strings"
	"time"
)

// snapshotRows adds the snapshot.* settings, beside each other so a part's settings
// are read together.
func snapshotRows() {
	add(spec{key: "snapshot.path", ptr: field(func(c *Config) *string { return &c.Snapshot.Path }), usage: "registry snapshot file; empty disables saving and loading",
		set: func(c *Config, _ *loadCtx, v raw) error { c.Snapshot.Path = strings.TrimSpace(v.text); return nil },
		get: func(c *Config) string { return c.Snapshot.Path }},
		"/var/lib/pvans/registry.snapshot", restart("the snapshot is loaded at start; a new path would lose the loaded registry's file"),
		"Registry snapshot, so a restarted daemon answers at once. Empty disables.")
	add(durSpec("snapshot.interval", "time between snapshot saves", time.Second, 0,
		func(c *Config) *time.Duration { return &c.Snapshot.Interval }),
		"1m", live("next snapshot save", "snapshot"),
		"Time between saves.")
	add(durSpec("snapshot.unverified_window", "how long names loaded from a snapshot are answered before a probe must confirm their server",
		time.Second, 0, func(c *Config) *time.Duration { return &c.Snapshot.UnverifiedWindow }),
		"10m", live("registry: the expiry of unconfirmed snapshot servers is re-armed", "registry"),
		"Names loaded from a snapshot are answered this long before a probe must confirm their server; unconfirmed ones are then dropped.")
}
