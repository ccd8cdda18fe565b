package resolver

// DefaultMaxWaitsPerClient is the bound the daemon gives every Policy
// (issue 40: a constant, not a setting): unanswered names one connection
// may have remembered for a push answer. A waiter only speeds an answer
// up (the client's own retry finds the name anyway), so it bounds memory,
// not service: about 1 KiB per waiter with its search-through entry, and
// tcp.waiters_per_source and tcp.waiters_total bound them all.
const DefaultMaxWaitsPerClient = 100_000
