package dnswatch

import "time"

// The bounds the daemon gives the watcher (issue 40: constants, not
// settings; docs/SECURITY.md, "Bounds"). A site names a handful of hosts
// in its lists; these keep a mistaken list, or a DNS answer naming
// thousands of addresses, from costing more than a few lookups.
const (
	// DefaultTimeout bounds one lookup; a failed lookup keeps the last
	// answer.
	DefaultTimeout = 5 * time.Second
	// DefaultConcurrency: lookups running at once.
	DefaultConcurrency = 4
	// DefaultMaxNames: host names followed at most; the others keep their
	// address from load (counted).
	DefaultMaxNames = 256
	// DefaultMaxAddresses: addresses one host name stands for at most;
	// the rest of an answer is dropped (counted). A Kubernetes headless
	// service of a few dozen pods fits.
	DefaultMaxAddresses = 64
)
