package config

// searchRows adds the search.* settings, beside each other so a part's settings
// are read together.
func searchRows() {
	add(boolSpec("search.through", nil, false, "search names no probe could list on addr_list and name_servers, like a client",
		func(c *Config) *bool { return &c.Search.Through }),
		"true", live("resolver: waited names handed to (or taken from) the search ring", "search"),
		"Search names that no probe could list on addr_list and name_servers, with the spec's client ring (one search per distinct name however many clients wait, 30 s saturation), as a PVXS client would for them. Turn it off to answer only from beacons, probes and static lists.")
	s := boolSpec("search.discovery_at_start", nil, false, "send one discovery ping to addr_list at start",
		func(c *Config) *bool { return &c.Search.DiscoveryAtStart })
	s.flag = "discovery-at-start"
	add(s,
		"true", restart("it only means something at start"),
		"Send one discovery ping to addr_list at start, so servers are found before their next beacon (up to 180 s).")
	add(intSpec("search.through_max_names", "distinct names searched through at once; names wanted beyond are not searched through (counted); 0 = no bound. Also bounds the (server, name) claims remembered for asking unlistable servers, oldest forgotten first (10000 when 0)", 0, 100_000_000,
		func(c *Config) *int { return &c.Search.ThroughMaxNames }),
		"10000", live("search ring: new names; a lowered bound drops none being searched", "ring"),
		"Distinct names searched through at once; names wanted beyond are not searched through (counted). 0 = no bound.")
	// A PVXS client searching 10,000 names sends about 10 datagrams/s once
	// its ring saturates; 50/s leaves room for start-up bursts.
	add(floatSpec("search.through_datagrams_per_second", "search-through datagrams sent per second at most (each to every destination); 0 = no bound", 0, 1_000_000,
		func(c *Config) *float64 { return &c.Search.ThroughDatagramsPerSecond }),
		"50", live("search ring: next datagram, with a full burst", "ring"),
		"Search-through datagrams sent per second at most, each to every addr_list destination and name server. 0 = no bound.")
	add(intSpec("search.max_name_bytes", "names longer than this are not answered, waited for or searched through (pvAccessCPP refuses over 500); 0 = no bound", 0, 65535,
		func(c *Config) *int { return &c.Search.MaxNameBytes }),
		"500", live("resolver policy, next lookup; registry, next listing", "resolver", "registry"),
		"Names longer than this are not answered, waited for or searched through (pvAccessCPP refuses channel names over 500 bytes). 0 = no bound.")
}
