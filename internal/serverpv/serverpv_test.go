package serverpv

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/tcpsearch"
)

type result struct {
	names []string
	info  probe.Info
	err   error
}

type sink struct{ ch chan result }

func (s sink) Listed(_ pva.GUID, _ netip.AddrPort, names []string, info probe.Info) {
	s.ch <- result{names: names, info: info}
}
func (s sink) Unlistable(_ pva.GUID, _ netip.AddrPort, err error) { s.ch <- result{err: err} }
func (s sink) Lost(pva.GUID, netip.AddrPort, string)              {}

// pvans's own TCP port answers the `server` PV like a PVXS server does:
// the project's prober (which speaks pvxlist's exact RPC) lists it.
func TestListedLikeAPVXSServer(t *testing.T) {
	reg := registry.New(registry.Options{})
	defer reg.Close()
	res := resolver.New(reg, resolver.Options{})
	defer res.Close()
	// Names pvans resolves for others are not "its" channels.
	g := pva.GUID{1}
	if _, err := reg.UpsertServer(registry.ServerInfo{GUID: g, Addr: netip.MustParseAddrPort("127.0.0.1:5999")}); err != nil {
		t.Fatal(err)
	}
	if err := reg.ReplaceNames(g, []string{"other:pv"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	srv := tcpsearch.New(tcpsearch.Options{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")},
		Channels: New("pvans 9.9", Limits{})}, tcpsearch.FromResolver(res))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	k := sink{ch: make(chan result, 4)}
	p := probe.New(probe.Options{Sink: k, Reprobe: -1, PingWait: 100 * time.Millisecond})
	defer p.Close()
	p.Probe(pva.GUID{9}, srv.Addrs()[0], probe.ReasonManual)
	select {
	case r := <-k.ch:
		if r.err != nil {
			t.Fatalf("pvans not listable: %v", r.err)
		}
		if len(r.names) != 0 {
			t.Fatalf("pvans listed %v as its own channels", r.names)
		}
		if r.info.ImplLang != "go" || r.info.Version != "pvans 9.9" {
			t.Fatalf("info = %+v", r.info)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no listing")
	}
}
