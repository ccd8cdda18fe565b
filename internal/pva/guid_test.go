package pva

import "testing"

// A pvans GUID is told from another server's by its first bytes only.
func TestPvansGUID(t *testing.T) {
	g := PvansGUID(GUID{0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac})
	if !g.IsPvans() || g.String() != "7076616e73a6a7a8a9aaabac" {
		t.Fatalf("PvansGUID = %s (IsPvans %v)", g, g.IsPvans())
	}
	for _, o := range []GUID{{}, {'p', 'v', 'a', 'n'}, {'p', 'v', 'a', 'n', 'S'}, {1, 'p', 'v', 'a', 'n', 's'}} {
		if o.IsPvans() {
			t.Errorf("%s IsPvans", o)
		}
	}
}
