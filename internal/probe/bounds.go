package probe

import "time"

// The bounds the daemon gives the prober (issue 40: constants, not
// settings; docs/SECURITY.md, "Bounds").
const (
	// DefaultPerHostConcurrency: servers of one IP address listed at the
	// same time, its share of probe.concurrency, so one host of many IOCs
	// (or one that names many ports) cannot take the whole pool.
	DefaultPerHostConcurrency = 4
	// DefaultBackoffMax caps the retry delay after failed probes (it
	// doubles from probe.backoff_min): a server down for a day is tried
	// every five minutes, and comes back sooner by its beacon.
	DefaultBackoffMax = 5 * time.Minute
	// DefaultFirstTimeout is the timeout of the first attempt at a server
	// never listed (retries get probe.timeout), so a server that holds
	// the connection silent does not hold a probe slot for long.
	DefaultFirstTimeout = 5 * time.Second
	// DefaultThroughRetries: an endpoint known only from search replies
	// (anyone can name any endpoint in one) is forgotten after this many
	// failed probes in a row.
	DefaultThroughRetries = 4
	// DefaultMaxThrough: endpoints known only from search replies probed
	// at most (and search-through answers being checked over TCP); beyond
	// it new ones are dropped (pvans_probe_search_through_dropped_total).
	// test/trust's hostile replies stay within it.
	DefaultMaxThrough = 1024
)
