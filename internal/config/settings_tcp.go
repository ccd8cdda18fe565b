package config

// tcpRows adds the tcp.* settings, beside each other so a part's settings
// are read together.
func tcpRows() {
	add(intSpec("tcp.max_connections", "name-server client connections at most", 1, 10_000_000,
		func(c *Config) *int { return &c.TCP.MaxConnections }),
		"10000", live("TCP policy, next accepted connection", "tcp"),
		"Name-server client connections at most.")
	// A waiter only speeds an answer up (the client's own retry finds the
	// name anyway), so these bound memory, not service: about 1 KiB per
	// waiter with its search-through entry.
	add(intSpec("tcp.waiters_total", "unanswered names remembered for push over all connections; 0 = no bound", 0, 100_000_000,
		func(c *Config) *int { return &c.TCP.WaitersTotal }),
		"100000", live("resolver policy: raised now, lowered as waiters leave", "resolver"),
		"Unanswered names remembered over all connections, to be answered as soon as they are learned (about 1 KiB each); 0 = no bound. One client address may hold at most resolver.DefaultMaxWaitsPerSource (10,000) of them, one connection resolver.DefaultMaxWaitsPerClient (100,000).")
}
