// Package perf holds the end-to-end performance harnesses behind
// docs/PERFORMANCE.md: registry fill time and memory, the latency from a
// new server's first beacon to a waiting client's pushed answer, the time
// for a dead server's names to leave the registry, and UDP/TCP search
// throughput against a pvans process (and, for comparison, any PVA server
// given by address and PID).
//
// Everything is in tests that skip unless PVANS_PERF=1: they take minutes,
// start real processes and must not run in CI. The exception is
// TestBigClient (docs/PERFORMANCE.md, "Big clients"), which runs in CI in
// about 15 s and fails on counts, not times: a 100,000-name client
// searching like a PVXS search ring must not be rate-limited nor lose
// replies in its receive buffer. The daemon under test is the pvans binary
// (built once per run, or PVANS_BIN), run as its own process so its CPU and
// memory are its own; simulated servers (internal/sim) and the load
// generator (internal/bench) run in the test process. All traffic is on
// 127.0.0.1.
//
// The package owns no production code; it only measures.
package perf
