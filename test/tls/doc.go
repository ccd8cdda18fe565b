// Package tls holds the end-to-end tests of Secure PVAccess through pvans:
// the real pvans binary on loopback, simulated servers (internal/sim) that
// serve TLS on a second port with certificates the tests make, and clients
// that offer "tls" or do not. The rule under test is docs/SECURITY.md,
// "TLS": pvans never answers a client that offers TLS with a server's plain
// endpoint when the server has a TLS one.
package tls
