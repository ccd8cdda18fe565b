package insight

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
)

// A GUID change more than GUIDChangesPerHour times within an hour is an
// anomaly, reported once an hour per endpoint; changes spread over more
// than an hour are not.
func TestGUIDChurn(t *testing.T) {
	in := New(withProduction(Options{GUIDChangesPerHour: 3, Clock: clock.NewFake(time.Time{})}))
	ep := netip.MustParseAddrPort("10.0.0.5:5075")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		if _, due := in.GUIDChanged(ep, t0.Add(time.Duration(i)*time.Minute)); due {
			t.Fatalf("change %d reported; the limit is 3", i+1)
		}
	}
	if d, due := in.GUIDChanged(ep, t0.Add(4*time.Minute)); !due || d == "" {
		t.Fatal("4th change within the hour not reported")
	}
	if _, due := in.GUIDChanged(ep, t0.Add(5*time.Minute)); due {
		t.Error("reported twice within the hour")
	}
	// Another endpoint changing once every 25 minutes never trips it.
	slow := netip.MustParseAddrPort("10.0.0.6:5075")
	for i := range 10 {
		if _, due := in.GUIDChanged(slow, t0.Add(time.Duration(i)*25*time.Minute)); due {
			t.Errorf("slow changes reported at change %d", i+1)
		}
	}
	// After the hour, the churning endpoint can be reported again.
	for i := range 4 {
		_, due := in.GUIDChanged(ep, t0.Add(2*time.Hour+time.Duration(i)*time.Minute))
		if due != (i == 3) {
			t.Errorf("second hour, change %d: due %v", i+1, due)
		}
	}
	if n := in.anomalies(AnomalyGUIDChurn); n != 2 {
		t.Errorf("%d guid_churn anomalies counted, want 2", n)
	}
}

func TestBeaconsStoppedAndNotAllowedOncePerHour(t *testing.T) {
	in := New(withProduction(Options{Clock: clock.NewFake(time.Time{})}))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ep := netip.MustParseAddrPort("10.0.0.5:5075")
	a := netip.MustParseAddr("192.0.2.66")
	for i, want := range []bool{true, false, false} {
		at := t0.Add(time.Duration(i) * 20 * time.Minute)
		if _, due := in.BeaconsStopped(ep, at); due != want {
			t.Errorf("beacons stopped #%d: due %v", i, due)
		}
		if _, due := in.NotAllowed(a, at); due != want {
			t.Errorf("not allowed #%d: due %v", i, due)
		}
	}
	if _, due := in.NotAllowed(a, t0.Add(61*time.Minute)); !due {
		t.Error("not reported again after an hour")
	}
	if _, due := in.NotAllowed(netip.MustParseAddr("192.0.2.67"), t0); !due {
		t.Error("another sender not reported")
	}
}

// The tables are bounded: beyond maxTracked endpoints, new ones are not
// remembered (nothing grows), old ones expire and make room.
func TestAnomalyTablesBounded(t *testing.T) {
	in := New(withProduction(Options{Clock: clock.NewFake(time.Time{})}))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range maxTracked + 100 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		in.NotAllowed(a, t0)
		in.GUIDChanged(netip.AddrPortFrom(a, 5075), t0)
	}
	if len(in.an.reported) > maxTracked || len(in.an.churn) > maxTracked {
		t.Fatalf("tables grew to %d and %d", len(in.an.reported), len(in.an.churn))
	}
	if _, due := in.NotAllowed(netip.MustParseAddr("192.0.2.1"), t0.Add(2*time.Hour)); !due {
		t.Error("expired entries did not make room")
	}
}

// Names and Clients are required: New says so rather than allocate
// summaries of no slot. The other settings' zero values are off or the
// least: no GUID churn is checked, and staging takes the smallest buffers.
func TestZeroOptions(t *testing.T) {
	for _, o := range []Options{{}, {Names: 10}, {Clients: 10}} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "insight.names") {
					t.Errorf("New(%+v) recovered %v, want a panic naming the settings", o, r)
				}
			}()
			New(o)
		}()
	}
	in := New(Options{Names: 10, Clients: 10, Clock: clock.NewFake(time.Time{})})
	for i := range in.stages {
		if c := cap(in.stages[i].buf); c != minStage {
			t.Errorf("staging buffer %d: cap %d, want %d", i, c, minStage)
		}
	}
	ep := netip.MustParseAddrPort("10.0.0.5:5075")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 100 {
		if _, due := in.GUIDChanged(ep, t0.Add(time.Duration(i)*time.Second)); due {
			t.Fatalf("change %d reported without a GUIDChangesPerHour", i+1)
		}
	}
}
