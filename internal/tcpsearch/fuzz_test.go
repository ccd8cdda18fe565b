package tcpsearch

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/testutil"
)

// fuzzRig is a Server that was never started: sessions are served on one
// end of a net.Pipe, in process.
type fuzzRig struct {
	reg *registry.Registry
	res *resolver.Resolver
	srv *Server
}

func newFuzzRig(t testing.TB) *fuzzRig {
	reg := registry.New(registry.Options{FieldNames: true})
	res := resolver.New(reg, resolver.Options{MaxWaitsPerClient: 64})
	for _, s := range []struct {
		g     pva.GUID
		proto string
		names []string
	}{{guidA, "tcp", []string{"cap:a:mbox1", "cap:a:mbox2"}}, {guidB, "tls", []string{"cap:b:mbox3"}}} {
		ep := epA
		if s.g == guidB {
			ep = epB
		}
		if _, err := reg.UpsertServer(registry.ServerInfo{GUID: s.g, Addr: ep, Protocol: s.proto}); err != nil {
			t.Fatal(err)
		}
		if err := reg.AddNames(s.g, s.names, registry.SourceProbe); err != nil {
			t.Fatal(err)
		}
	}
	srv := New(Options{GUID: guidN, MaxNamesPerSearch: 16, MessageRate: 1e6, MessageBurst: 1000,
		Conn: pvaconn.Options{MaxMessage: 64 << 10, HandshakeTimeout: 2 * time.Second, MessageTimeout: 2 * time.Second,
			IdleTimeout: 5 * time.Second}}, FromResolver(res))
	t.Cleanup(res.Close)
	return &fuzzRig{reg: reg, res: res, srv: srv}
}

// run feeds in to one session (after a valid handshake unless raw) and
// returns the bytes the session sent back after its greeting.
func (r *fuzzRig) run(t testing.TB, in []byte, raw bool) int {
	sc, cc := net.Pipe()
	r.srv.cnt.active.Add(1) // as acceptLoop would; Closed takes it back
	conn := pvaconn.Serve(sc, r.srv.opt.Conn, &session{s: r.srv})
	var wg sync.WaitGroup
	var got int64
	wg.Add(1)
	go func() { // the client reads everything, as a well-behaved peer
		defer wg.Done()
		n, _ := io.Copy(io.Discard, cc)
		got = n
	}()
	cc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if !raw {
		cc.Write(pva.AppendClientValidation(nil, 0, &pva.ClientValidation{AuthMethod: "anonymous"}))
	}
	cc.Write(in)
	// A pipe write returns once the session has read it all, and the read
	// loop reads again only after dispatching every complete message: this
	// second write is the barrier that lets in be handled before Close.
	cc.Write(pva.AppendEcho(nil, 0, []byte("barrier")))
	conn.Close()
	select {
	case <-conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("session did not end after Close")
	}
	cc.Close()
	wg.Wait()
	return int(got)
}

// clientBlocks are the client-to-server TCP payloads of the PVXS capture
// (name-server search session and the pvxlist RPC session), the seeds.
var clientBlocks = [][]int{{28, 30, 32, 34, 36, 38}, {44, 46, 48, 50}}

func FuzzSession(f *testing.F) {
	cap := testutil.CaptureBlocks(f)
	for _, sess := range clientBlocks {
		var all []byte
		for i, n := range sess {
			if i > 0 { // after the captured validation block
				all = append(all, cap[n]...)
				f.Add(cap[n], false)
			}
		}
		f.Add(all, false)
		var withHandshake []byte
		for _, n := range sess {
			withHandshake = append(withHandshake, cap[n]...)
		}
		f.Add(withHandshake, true)
	}
	s := pva.Search{Seq: 1, Flags: pva.SearchMustReply, Protocols: [][]byte{[]byte("tcp"), []byte("tls")},
		Names: []pva.SearchName{{CID: 1, Name: []byte("cap:a:mbox1")}, {CID: 2, Name: []byte("cap:b:mbox3")},
			{CID: 3, Name: []byte("cap:a:mbox1.VAL")}, {CID: 4, Name: []byte("nobody")}}}
	f.Add(pva.AppendSearch(nil, pva.FlagBigEndian, &s), false)
	f.Add(pva.AppendSearch(nil, 0, &pva.Search{Seq: 2, Flags: pva.SearchMustReply}), false) // discovery ping
	seg := pva.AppendSearch(nil, pva.FlagBigEndian, &s)
	first := append(append([]byte(nil), seg[:8]...), seg[8:20]...)
	first[2] |= pva.FlagSegFirst
	f.Add(first, false)
	f.Add([]byte{0xCA, 2, 0x40, 0x07, 0, 0, 0, 9, 0, 1, 0, 0, 0, 1, 1, 'x'}, false) // CREATE_CHANNEL

	f.Fuzz(func(t *testing.T, in []byte, raw bool) {
		r := newFuzzRig(t)
		out := r.run(t, in, raw)
		// Bounded: replies grow at most linearly with the input (a
		// CREATE_CHANNEL refusal is the largest per input byte), plus the
		// handshake and one negative reply.
		if limit := 36 + 9 + 64*len(in) + 128; out > limit {
			t.Fatalf("%d reply bytes for %d input bytes", out, len(in))
		}
		if r.srv.cnt.active.Load() != 0 {
			t.Fatalf("active %d after the session ended", r.srv.cnt.active.Load())
		}
		if w := r.res.Stats().Waiting; w != 0 {
			t.Fatalf("%d waiters left after the session ended", w)
		}
		if r.srv.cnt.names.Load() > uint64(16*max(r.srv.cnt.searches.Load(), 1)) {
			t.Fatalf("names per search bound not applied: %+v", metrics.Sprint(&r.srv.cnt))
		}
	})
}

// The rig really dispatches: a captured search and the pvxlist session
// produce answers and are counted, so FuzzSession is not fuzzing a
// connection that closed before reading.
func TestFuzzRigDispatches(t *testing.T) {
	cap := testutil.CaptureBlocks(t)
	r := newFuzzRig(t)
	s := pva.Search{Seq: 1, Protocols: [][]byte{[]byte("tcp")}, Names: []pva.SearchName{{CID: 1, Name: []byte("cap:a:mbox1")}}}
	in := append(pva.AppendSearch(nil, pva.FlagBigEndian, &s), cap[30]...)
	r.run(t, in, false) // replies may be cut by the Close: count what was queued
	if r.srv.cnt.searches.Load() != 2 || r.srv.cnt.responses.Load() != 2 || r.srv.cnt.sendErrors.Load() != 0 {
		t.Fatalf("stats %+v", metrics.Sprint(&r.srv.cnt))
	}
}
