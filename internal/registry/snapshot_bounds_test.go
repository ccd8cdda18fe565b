package registry

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// hostileSnapshot builds a tiny file with a valid checksum whose counts
// claim far more records than its bytes can hold.
func hostileSnapshot(t *testing.T, body func(b []byte) []byte) string {
	t.Helper()
	b := []byte(snapMagic)
	b = binary.LittleEndian.AppendUint32(b, snapVersion)
	b = body(b)
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	path := filepath.Join(t.TempDir(), "hostile.snapshot")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// allocated returns the bytes f allocated.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestSnapshotCountsBoundedByFileSize: a 67-byte snapshot with a valid
// checksum once made the loader allocate 1.7 GB from its counts.
// Counts that the remaining bytes cannot hold are refused before anything
// is allocated for them.
func TestSnapshotCountsBoundedByFileSize(t *testing.T) {
	guid := make([]byte, 12)
	cases := map[string]func(b []byte) []byte{
		"servers": func(b []byte) []byte {
			return binary.AppendUvarint(b, 1<<24) // 16M servers in a few bytes
		},
		"names": func(b []byte) []byte {
			b = binary.AppendUvarint(b, 1)
			b = append(b, guid...)
			b = append(b, 0, 0, 0, 0) // addr "", protocol "", version, discovered
			b = append(b, make([]byte, 8+8+2+1+8)...)
			b = append(b, 0)                      // TLS endpoint "" (version 2)
			return binary.AppendUvarint(b, 1<<26) // 64M names
		},
		"duplicates": func(b []byte) []byte {
			b = binary.AppendUvarint(b, 0)
			return binary.AppendUvarint(b, 1<<26)
		},
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			path := hostileSnapshot(t, body)
			if fi, _ := os.Stat(path); fi.Size() > 100 {
				t.Fatalf("hostile file is %d bytes; want a tiny one", fi.Size())
			}
			r := New(Options{})
			defer r.Close()
			var err error
			got := allocated(func() { err = r.LoadSnapshot(path) })
			if !errors.Is(err, ErrSnapshot) {
				t.Fatalf("LoadSnapshot = %v, want ErrSnapshot", err)
			}
			// The bound: a few KiB of bookkeeping, nothing from the counts.
			if got > 1<<20 {
				t.Fatalf("loading a %s-count bomb allocated %d bytes; want < 1 MiB", name, got)
			}
			if c := r.Counts(); c.Servers != 0 || c.Names != 0 {
				t.Fatalf("registry not empty after a refused snapshot: %+v", c)
			}
		})
	}
}
