package config

// insightRows adds the insight.* settings, beside each other so a part's settings
// are read together.
func insightRows() {
	add(intSpec("insight.names", "unresolved names kept per summary (4 summaries: two windows of two periods); memory is allocated at start", 10, 1_000_000,
		func(c *Config) *int { return &c.Insight.Names }),
		"10000", restart("the insight summaries are allocated at start"),
		"Heavy-hitter summaries of search traffic (/v1/insight, pvans list --unresolved/--clients). Slots per summary; four summaries each (two windows of two periods), allocated at start. With k slots a count is off by at most (searches in the window)/k. Searching clients are kept the same way in insight.DefaultClients (10,000) slots.")
}
