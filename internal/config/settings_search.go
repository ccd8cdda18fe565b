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
}
