package resolver

// DefaultMaxWaitsPerClient is the bound the daemon gives every Policy
// (issue 40: a constant, not a setting): unanswered names one connection
// may have remembered for a push answer. A waiter only speeds an answer
// up (the client's own retry finds the name anyway), so it bounds memory,
// not service: about 1 KiB per waiter with its search-through entry, and
// DefaultMaxWaitsPerSource and tcp.waiters_total bound them all.
const DefaultMaxWaitsPerClient = 100_000

// DefaultMaxWaitsPerSource bounds the same over all connections from one
// client address: 10,000 is ten of the biggest real clients on one host
// (a Phoebus or archiver of ~1,000 missing names), about 10 MB; the site
// sizes the total, tcp.waiters_total.
const DefaultMaxWaitsPerSource = 10_000
