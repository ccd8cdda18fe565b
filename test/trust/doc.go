// Package trust holds the on-the-wire regression tests of issue 13: the
// attacks a host on the same network can mount with forged UDP datagrams
// (beacons, discovery and search replies) against the real pvans binary,
// in network namespaces the tests make, and the legitimate cases that must
// keep working. The rule under test is docs/SECURITY.md, "Trust": a UDP
// datagram is a hint; only a TCP exchange with the endpoint moves a name.
package trust
