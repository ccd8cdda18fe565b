package daemon

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pva"
)

// A server loaded from a snapshot is provisional. When the probe finds
// nobody at its endpoint (the connection is refused) or something that is
// not a PVA server there, it is gone: its names leave at once, and a
// server listed over TCP that claims them takes them, instead of clients
// being sent to a dead endpoint until snapshot.unverified_window ends.
// A server that answers but will not list may still be the one the
// snapshot names: it keeps its names.
func TestSnapshotServerGoneWhenEndpointRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		gone bool
	}{
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{"not_pva", errors.New("probe: not a PVA server (bad greeting)"), true},
		{"unlistable", &probe.ListError{Step: "create channel"}, false},
		{"timeout", fmt.Errorf("dial: %w", syscall.ETIMEDOUT), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g1, g2 := pva.GUID{0x51}, pva.GUID{0x52}
			ep1, ep2 := netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.2:1")
			names := []string{"snap:a", "snap:b"}
			path := filepath.Join(t.TempDir(), "pvans.snap")
			old := newIdleDaemon(t, testConfig(t))
			probeSink{old}.Listed(g1, ep1, names, probe.Info{})
			if err := old.Registry.SaveSnapshot(path); err != nil {
				t.Fatal(err)
			}
			d := newIdleDaemon(t, testConfig(t))
			if err := d.Registry.LoadSnapshot(path); err != nil {
				t.Fatal(err)
			}
			_ = os.Remove(path)
			if s, ok := d.Registry.Server(g1); !ok || s.Verified {
				t.Fatalf("setup: snapshot server %+v %v, want loaded unverified", s, ok)
			}
			probeSink{d}.Listed(g2, ep2, names, probe.Info{}) // proven over TCP, a duplicate for now
			probeSink{d}.Unlistable(g1, ep1, tc.err)
			_, kept := d.Registry.Server(g1)
			h, _ := d.Registry.LookupName("snap:a")
			switch {
			case tc.gone && kept:
				t.Fatalf("snapshot server kept after its endpoint %s", probe.Category(tc.err))
			case tc.gone && (h == nil || h.GUID != g2):
				t.Fatalf("snap:a held by %+v, want the listed server %s", h, g2)
			case !tc.gone && (!kept || h == nil || h.GUID != g1):
				t.Fatalf("snapshot server dropped (%v) or its name moved (%+v) on %s", !kept, h, probe.Category(tc.err))
			}
		})
	}
	// A server proven over TCP in this run is not dropped for a refused
	// connection: that is a retry (its watch decides when it is lost).
	d := newIdleDaemon(t, testConfig(t))
	g, ep := pva.GUID{0x53}, netip.MustParseAddrPort("127.0.0.3:1")
	probeSink{d}.Listed(g, ep, []string{"live:a"}, probe.Info{})
	probeSink{d}.Unlistable(g, ep, fmt.Errorf("dial: %w", syscall.ECONNREFUSED))
	if _, ok := d.Registry.Server(g); !ok {
		t.Fatal("a verified server was dropped on one refused connection")
	}
}
