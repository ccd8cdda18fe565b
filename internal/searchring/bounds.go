package searchring

// The bounds the daemon gives the ring (issue 40: constants, not
// settings; docs/SECURITY.md, "Bounds").
const (
	// DefaultMaxChannels: distinct names searched through at once; names
	// wanted beyond are not searched through (counted). Also bounds the
	// (server, name) claims remembered for asking unlistable servers.
	DefaultMaxChannels = 10_000
	// DefaultDatagramsPerSecond: a PVXS client searching 10,000 names
	// sends about 10 datagrams/s once its ring saturates; 50/s leaves room
	// for start-up bursts (test/hostile checks the bound).
	DefaultDatagramsPerSecond = 50
)
