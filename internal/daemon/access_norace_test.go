//go:build !race

package daemon

import (
	"testing"

	"github.com/pvans-project/pvans/internal/config"
)

// The per-name check does not allocate, whatever the pattern kind. (Not
// under -race: the race detector makes sync.Pool, which regexp uses for its
// matchers, drop items at random.)
func TestNameFilterAllocatesNothing(t *testing.T) {
	f := nameFilter(&config.Access{NameAllow: patterns("LINAC:*", "re:RING:[0-9]+"), NameDeny: patterns("LINAC:x:*", "LINAC:y?z", "BL:valve")})
	names := [][]byte{[]byte("LINAC:abc:def"), []byte("RING:1234"), []byte("LINAC:x:1"), []byte("BL:valve.VAL"), []byte("LINAC:yaz"), []byte("zzz")}
	allocs := testing.AllocsPerRun(200, func() {
		for _, n := range names {
			f(n)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per round", allocs)
	}
}
