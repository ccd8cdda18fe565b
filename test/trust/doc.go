// Package trust holds the on-the-wire regression tests of the trust rule:
// the attacks a host on the same network can mount with forged UDP
// datagrams (beacons, discovery and search replies) or with a PVA server of
// its own answering pvans's TCP searches for other hosts, against the real
// pvans binary, in network namespaces the tests make, and the legitimate
// cases that must keep working. The rules under test are
// docs/SECURITY.md, "Trust": a UDP datagram is a hint; only a TCP exchange
// with the endpoint moves a name; a server, over UDP or TCP, may name only
// itself.
//
// Each test has namespaces, veths and a pvans of its own and spends most
// of its time waiting for the daemon, so the tests run in parallel
// (t.Parallel; go test's -parallel says how many at once).
package trust
