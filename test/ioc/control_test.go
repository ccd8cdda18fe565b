package ioc

import (
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// Each runtime control of the site, given as the command a user types in
// `pvans demo` (sim.Site.Exec), and what pvans does about it.

// fastBeacons: a change of names reaches pvans at the server's next
// beacon; with the PVXS schedule that is up to 15 s (180 s later on).
var fastBeacons = sim.Options{BeaconInterval: 200 * time.Millisecond}

func TestControlRestartNewGUID(t *testing.T) {
	s := start(t, 2, 10, 0, sim.Options{})
	const name = "sim:s1:pv4"
	before, ok := s.resolve(t, name, 5*time.Second)
	if !ok || before.GUID != s.site.Server(1).GUID {
		t.Fatalf("before: %+v", before)
	}
	s.exec(t, "restart 1")
	now := s.site.Server(1).GUID
	if now == before.GUID {
		t.Fatal("restart kept the GUID")
	}
	took := testutil.WaitFor(t, 10*time.Second, "pvans answers with the new GUID", func() bool {
		a, ok := s.resolve(t, name, time.Second)
		return ok && a.GUID == now
	})
	t.Logf("pvans answered with the new GUID %s after %s", now, took)
	// and the client it sends there gets the value
	if v := s.open(t, name).get().Field("value").Float; v < 100004 {
		t.Fatalf("value after restart %v", v)
	}
}

func TestControlKillNamesLeaveWithinWatchTime(t *testing.T) {
	const echo = time.Second
	s := start(t, 2, 10, echo, sim.Options{})
	watch := echo + min(echo, 10*time.Second) // nothing received for this long: the watch connection is closed
	if _, ok := s.resolve(t, "sim:s0:pv1", 5*time.Second); !ok {
		t.Fatal("not resolved before the kill")
	}
	t0 := time.Now()
	s.exec(t, "kill 0")
	took := testutil.WaitFor(t, 30*time.Second, "server 0's names gone", func() bool {
		for _, n := range s.site.Server(0).Names {
			if s.d.Registry.Lookup([]byte(n)) != nil {
				return false
			}
		}
		return true
	})
	t.Logf("killed server's names left after %s (watch time %s)", time.Since(t0), watch)
	if took > watch+2*time.Second { // slack: scheduling on a loaded machine
		t.Fatalf("names left after %s, want within the watch time %s", took, watch)
	}
	if _, ok := s.resolve(t, "sim:s0:pv1", 300*time.Millisecond); ok {
		t.Fatal("pvans still answers for the killed server")
	}
	if _, ok := s.resolve(t, "sim:s1:pv1", 5*time.Second); !ok {
		t.Fatal("the other server's names went too")
	}
}

func TestControlStopNamesLeave(t *testing.T) {
	s := start(t, 2, 10, 0, sim.Options{})
	s.exec(t, "stop 1")
	// A clean close ends the watch connection at once.
	testutil.WaitFor(t, 5*time.Second, "stopped server's names gone", func() bool {
		return s.d.Registry.Lookup([]byte("sim:s1:pv0")) == nil
	})
	if _, ok := s.resolve(t, "sim:s1:pv3", 300*time.Millisecond); ok {
		t.Fatal("pvans answers for a stopped server")
	}
}

func TestControlAddAndRemoveName(t *testing.T) {
	s := start(t, 2, 10, 0, fastBeacons)
	s.exec(t, "add 1 demo:new:pv")
	// The client asks before pvans knows: pvans holds the search and
	// answers when the listing after the next beacon brings the name.
	a, ok := s.resolve(t, "demo:new:pv", 10*time.Second)
	if !ok || a.GUID != s.site.Server(1).GUID {
		t.Fatalf("added name: %+v %v", a, ok)
	}
	if v := connect(t, a.Endpoint, "demo:new:pv").get().Field("value").Float; v < 100010 {
		t.Fatalf("new PV value %v", v)
	}
	s.exec(t, "remove 1 sim:s1:pv2")
	testutil.WaitFor(t, 10*time.Second, "removed name gone", func() bool {
		return s.d.Registry.Lookup([]byte("sim:s1:pv2")) == nil
	})
	if _, ok := s.resolve(t, "sim:s1:pv3", 2*time.Second); !ok {
		t.Fatal("a name that stayed went too")
	}
}

func TestControlNewServer(t *testing.T) {
	s := start(t, 1, 10, 0, sim.Options{})
	out := s.exec(t, "new lab:a lab:b")
	if !strings.HasPrefix(out, "server 1 started") {
		t.Fatalf("new: %q", out)
	}
	a, ok := s.resolve(t, "lab:b", 10*time.Second)
	if !ok || a.GUID != s.site.Server(1).GUID || a.Endpoint != s.site.Server(1).TCP {
		t.Fatalf("new server's name: %+v %v", a, ok)
	}
}
