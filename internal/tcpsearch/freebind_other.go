//go:build !linux

package tcpsearch

// freebind: no such option here; an address not yet configured fails to
// bind as before.
func freebind(uintptr, bool) error { return nil }
