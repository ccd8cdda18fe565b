package config

// insightRows adds the insight.* settings, beside each other so a part's settings
// are read together.
func insightRows() {
	add(intSpec("insight.names", "unresolved names kept per summary (4 summaries: two windows of two periods); memory is allocated at start", 10, 1_000_000,
		func(c *Config) *int { return &c.Insight.Names }),
		"10000", restart("the insight summaries are allocated at start"),
		"Heavy-hitter summaries of search traffic (/v1/insight, pvans list --unresolved/--clients). Slots per summary; four summaries each (two windows of two periods), allocated at start. With k slots a count is off by at most (searches in the window)/k.")
	add(intSpec("insight.clients", "searching clients kept per summary (4 summaries); memory is allocated at start", 10, 1_000_000,
		func(c *Config) *int { return &c.Insight.Clients }),
		"10000", restart("the insight summaries are allocated at start"),
		"Searching clients kept per summary, the same way.")
	add(bytesSpec("insight.queue_bytes", "staging between the answer paths and the insight summaries; searches beyond it are not summarised (counted)", 32<<10, 1<<30,
		func(c *Config) *int64 { return &c.Insight.QueueBytes }),
		"4MiB", restart("the insight staging buffers are allocated at start"),
		"Staging between the answer paths and the summaries; beyond it searches are not summarised (pvans_insight_dropped_names_total).")
	// A distinct name costs both windows' name summaries 1–2 µs (cache
	// misses, measured in the daemon): 2000 bounds them to ~0.4 % of a
	// core, while a site's usual missing-name traffic (hundreds a second)
	// is counted exactly.
	add(intSpec("insight.digest_names_per_second", "unclaimed names a second the name summaries count in full; beyond it (a storm of distinct missing names) they count a weighted random sample, so their CPU stays bounded; 0 = no limit", 0, 1_000_000_000,
		func(c *Config) *int { return &c.Insight.DigestNamesPerSecond }),
		"2000", restart("insight takes its budget when it is built"),
		"Unclaimed names a second the name summaries count in full. Beyond it (a storm of distinct missing names) they count a weighted random sample, so the digest costs at most ~0.4 % of a core; the reports then give sample_rate < 1 (pvans_insight_sampled_out_names_total). 0 = no limit.")
	add(intSpec("insight.guid_changes_per_hour", "more GUID changes than this at one server endpoint within an hour is reported as an anomaly event", 1, 1_000_000,
		func(c *Config) *int { return &c.Insight.GUIDChangesPerHour }),
		"3", restart("insight takes its threshold when it is built"),
		"More GUID changes than this at one server endpoint within an hour is reported as an anomaly event.")
}
