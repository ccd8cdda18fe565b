package config

// registryRows adds the registry.* settings, beside each other so a part's settings
// are read together.
func registryRows() {
	add(intSpec("registry.max_servers", "servers tracked at most (also the beacon tracking limit)", 1, 10_000_000,
		func(c *Config) *int { return &c.Registry.MaxServers }),
		"20000", live("registry and beacon tracker: raised now, lowered at the next natural eviction; a relay's re-announce table at once", "registry", "beacon", "relay"),
		"Servers tracked at most; also the beacon tracking limit (PVXS: 20000) and the servers a relay keeps to re-announce.")
	add(intSpec("registry.max_names", "names held at most over all servers", 1, 1_000_000_000,
		func(c *Config) *int { return &c.Registry.MaxNames }),
		"5000000", live("registry: raised now, lowered at the next natural eviction", "registry"),
		"Names held at most over all servers.")
}
