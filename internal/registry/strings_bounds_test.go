package registry

import (
	"errors"
	"strings"
	"testing"
)

// TestServerStringsBounded: strings a server sends are bounded before the
// registry keeps them — listed and search-through names longer than
// MaxNameBytes (no client could search for them) are dropped and counted,
// and a probe error (which can carry the server's own status message) is
// kept to maxProbeError bytes. 20,000 servers × 60 KB strings would
// otherwise be 1.2 GB.
func TestServerStringsBounded(t *testing.T) {
	r := New(Options{MaxNameBytes: 500})
	if _, err := r.UpsertServer(ServerInfo{GUID: guid(1), Addr: addr(1)}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("L", 60000)
	ok := strings.Repeat("k", 500)
	if err := r.ReplaceNames(guid(1), []string{long, ok, long + "2"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	if err := r.AddNames(guid(1), []string{long + "3", "short"}, SourceSearchThrough); err != nil {
		t.Fatal(err)
	}
	if c := r.Counts(); c.Names != 2 {
		t.Fatalf("registry holds %d names, want the 2 within the bound", c.Names)
	}
	if r.st.nameLength.Load() != 3 {
		t.Fatalf("name-length drops %d, want 3", r.st.nameLength.Load())
	}
	if err := r.SetProbeState(guid(1), ProbeFailed, errors.New("server said: "+long)); err != nil {
		t.Fatal(err)
	}
	s, _ := r.Server(guid(1))
	if len(s.ProbeError) > maxProbeError+len("…") || !strings.HasPrefix(s.ProbeError, "server said: ") {
		t.Fatalf("probe error kept at %d bytes", len(s.ProbeError))
	}
}
