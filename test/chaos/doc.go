// Package chaos holds pvans' chaos and soak tests; it has no
// non-test code.
//
// The chaos tests build their own network: three namespaces per test,
// pvans-c-* (client net), pvans-p-* (pvans, two-homed) and pvans-s-*
// (server net), joined by veth pairs with addresses in 10.203.1.0/24 and
// 10.203.2.0/24 that exist only inside those namespaces. The real pvans
// binary runs in the middle namespace; simulated IOCs (internal/sim, run
// by re-executing the test binary so they can be killed with SIGKILL) run
// in the server net; the test's own clients reach pvans from the client
// net by switching an OS thread into that namespace. Faults are injected
// with signals and nftables rules inside the namespaces; nothing touches
// the host's interfaces. The tests need root and the ip command (and nft
// for the fault rules) and skip otherwise.
//
// The soak test runs the daemon in process on loopback, so goroutines,
// file descriptors and heap can be compared with a baseline.
//
// The package owns no daemon behaviour; a failure here is a finding about
// the packages it drives. docs/SECURITY.md ("Chaos and soak") says what
// each test shows and what it measured.
package chaos
