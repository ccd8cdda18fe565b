// Package pva is the PVAccess wire format: the 8-byte header, the primitive
// encodings (Size, String, Status, address, GUID), the messages a name
// server sends and receives, and the pvData subset the `server` RPC and a
// simulated server's GET need: type descriptors (with the receiver's 0xFD/
// 0xFE TypeCache), a generic Value tree, BitSet, and the NTURI /
// NTScalarArray / NTScalar helpers. It does not own connection state: the
// caller keeps one TypeCache per connection and direction. The channel
// operations only a simulated IOC serves (GET_FIELD, PUT, MONITOR) are
// internal/sim's, built from the operation helpers of op.go.
//
// It is pure data and functions: no sockets, goroutines, logging or clocks.
// Decoders never panic, never allocate from an untrusted length, and return
// a *DecodeError naming the message and field on short or malformed input.
// Search decoding hands out views into the caller's buffer (names are not
// copied), as a PVXS server hands names to its sources.
//
// References. Comments across pvans cite docs/protocol.md by section
// (docs/protocol.md, "CMD_SEARCH"): the protocol facts the code relies
// on, each with the PVXS or pvAccessCPP source it was read from, and the
// rules pvans follows. Some name a PVXS source directly (src/client.cpp,
// ContextImpl::tickSearch).
//
// "capture #N" is a numbered block of the repository's own capture,
// testdata/captures/loopback.txt: real PVXS and pvAccessCPP traffic
// recorded by scripts/record-captures.sh, its blocks listed in the README
// beside it. The golden tests decode every block; no test reads anything
// outside the repository.
package pva
