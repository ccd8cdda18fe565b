package beacon

import "time"

// DefaultCheckInterval is how often the daemon has expiry checked (issue
// 40: a constant, not a setting); PVXS checks every 10 s too.
const DefaultCheckInterval = 10 * time.Second

// CheckEvery is the check interval the daemon gives Timings for expiry:
// DefaultCheckInterval, or a quarter of a shorter expiry (at least 100
// ms), so a server is never kept much past its expiry.
func CheckEvery(expiry time.Duration) time.Duration {
	return min(DefaultCheckInterval, max(expiry/4, 100*time.Millisecond))
}
