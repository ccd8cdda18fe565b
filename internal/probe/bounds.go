package probe

import "time"

// The bounds the daemon gives the prober (issue 40: constants, not
// settings; docs/SECURITY.md, "Bounds").
const (
	// DefaultPerHostConcurrency: servers of one IP address listed at the
	// same time, its share of DefaultConcurrency, so one host of many IOCs
	// (or one that names many ports) cannot take the whole pool.
	DefaultPerHostConcurrency = 4
	// DefaultBackoffMax caps the retry delay after failed probes (it
	// doubles from DefaultBackoffMin): a server down for a day is tried
	// every five minutes, and comes back sooner by its beacon.
	DefaultBackoffMax = 5 * time.Minute
	// DefaultFirstTimeout is the timeout of the first attempt at a server
	// never listed (retries get DefaultTimeout), so a server that holds
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
	// DefaultConcurrency: servers listed at the same time. A listing is
	// one connection and one GET_FIELD/RPC of a few kB: 16 at once list
	// 1,000 IOCs starting together in seconds, and a hostile flood of
	// sightings cannot open more connections than this.
	DefaultConcurrency = 16
	// DefaultBackoffMin is the first retry delay after a failed probe; it
	// doubles (±20 %) up to DefaultBackoffMax. A server that refused once
	// is tried again within a second, as soon as a restarting IOC listens;
	// its beacon brings it back sooner anyway.
	DefaultBackoffMin = time.Second
	// DefaultTimeout is the time allowed to connect to a known server and
	// list its names: pva.conn_tmo's default (30 s, what a PVXS client
	// allows a connection), while a never-listed server gets
	// DefaultFirstTimeout.
	DefaultTimeout = 30 * time.Second
	// DefaultReprobeInterval: a watched server is listed again this often
	// (±10 %). Its death is seen on its watch connection and its restart
	// by its beacon; re-listing only catches names a running server added
	// or dropped (a p4p server's dynamic PVs), and a client asking for
	// such a name before then is answered by search-through.
	DefaultReprobeInterval = 5 * time.Minute
)

// The ECHO period of watch connections is not a constant: it is PVXS's
// client echo of pva.conn_tmo (config.PVA.EchoInterval, 15 s at the
// default), as a PVXS client keeps its connections, so the servers' own
// tcpTimeout never drops a probe connection.
