// Package testutil is test support shared by the packages' _test.go
// files: polling for a condition, free loopback ports, building the pvans
// binary once per test run, running a process and capturing its output,
// network namespaces made by a test (Linux, root), the PVXS loopback
// capture, goroutine-leak and socket-read helpers, and an output buffer
// goroutines may write while a test reads it.
//
// It is imported only by _test.go files, never by production code, and it
// imports nothing of this module, so any package's internal tests may use
// it without an import cycle. It owns no test topology or assertions of
// its own: what a test checks stays in that test.
package testutil
