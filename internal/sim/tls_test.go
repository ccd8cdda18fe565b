package sim

import (
	"crypto/tls"
	"slices"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/testutil"
)

// TestTLSSecondPort: a sim server with a TLS configuration listens on a
// second port, serves PVA over TLS there, and answers as PVXS's tls branch
// does: over UDP "tls" anywhere in the list gets the TLS port and "tls";
// over TCP "tls" counts only before "tcp"; a plain search gets "tcp" and
// the plain port. Beacons and listings are unchanged.
func TestTLSSecondPort(t *testing.T) {
	pki := testutil.NewPKI(t, "sim test CA")
	srv := pki.Issue(t, "sim-ioc", testutil.CertOptions{})
	s := startSite(t, Options{Servers: 1, NamesPerServer: 2, TLS: pki.ServerConfig(srv)})
	inf := s.Server(0)
	if !inf.TLS.IsValid() || inf.TLS.Port() == inf.TCP.Port() || inf.TLS.Addr() != inf.TCP.Addr() {
		t.Fatalf("tls endpoint %v, tcp %v", inf.TLS, inf.TCP)
	}
	for _, tc := range []struct {
		protos []string
		port   uint16
		proto  string
	}{
		{[]string{"tls", "tcp"}, inf.TLS.Port(), "tls"},
		{[]string{"tcp", "tls"}, inf.TLS.Port(), "tls"},
		{[]string{"tcp"}, inf.TCP.Port(), "tcp"},
	} {
		got := udpSearchProtos(t, inf.UDP, 0, tc.protos, 300*time.Millisecond, "sim:s0:pv1")
		if len(got) != 1 || got[0].Port != tc.port || string(got[0].Protocol) != tc.proto || !slices.Equal(got[0].CIDs, []uint32{100}) {
			t.Fatalf("udp %v: %+v", tc.protos, got)
		}
	}

	nc, err := tls.Dial("tcp", inf.TLS.String(), pki.ClientConfig(nil))
	if err != nil {
		t.Fatal(err)
	}
	if st := nc.ConnectionState(); st.Version != tls.VersionTLS13 || st.NegotiatedProtocol != "pva/1" {
		t.Fatalf("tls state version %x alpn %q", st.Version, st.NegotiatedProtocol)
	}
	c := handshake(t, nc)
	for _, tc := range []struct {
		protos []string
		port   uint16
		proto  string
	}{
		{[]string{"tls", "tcp"}, inf.TLS.Port(), "tls"},
		{[]string{"tcp", "tls"}, inf.TCP.Port(), "tcp"},
		{[]string{"tcp"}, inf.TCP.Port(), "tcp"},
	} {
		q := pva.Search{Seq: 9, Flags: pva.SearchUnicast, Names: []pva.SearchName{{CID: 41, Name: []byte("sim:s0:pv0")}}}
		for _, p := range tc.protos {
			q.Protocols = append(q.Protocols, []byte(p))
		}
		c.send(pva.AppendSearch(nil, pva.FlagBigEndian, &q))
		h, p := c.read()
		var r pva.SearchResponse
		if h.Command != pva.CmdSearchResponse || r.Decode(p, h.BigEndian()) != nil ||
			r.Port != tc.port || string(r.Protocol) != tc.proto || r.GUID != inf.GUID {
			t.Fatalf("tcp %v: %+v %+v", tc.protos, h, r)
		}
	}
	// The listing works over TLS as over TCP.
	cr := c.create(1, "server")
	if r := c.rpc(cr.SID, pva.OpChannels); !r.Status.OK() {
		t.Fatalf("listing over TLS: %+v", r)
	}
}
