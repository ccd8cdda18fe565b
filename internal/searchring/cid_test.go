package searchring

import (
	"testing"
)

// javaClaimable is how Phoebus core-pva's server reads a searched CID: as a
// signed int, a negative one being a "list servers" ping it answers with
// no claim (PVAServer.handleSearchRequest, cid < 0). Zero is a valid CID
// there, but the ring never uses it.
func javaClaimable(cid uint32) bool { return int32(cid) > 0 }

// Every CID the ring searches with (and asks a server about) is one a
// Java server would claim: with 32 random bits, about half of them were
// negative and never found, whatever the retries (a name keeps its CID).
func TestCIDsAJavaServerClaims(t *testing.T) {
	var cb callbacks
	r, clk, rc := newTestRing(t, cb.options(Options{}))
	const n = 2000
	for i := range n {
		r.Want(pvName(i, 12))
	}
	clk.Advance(InitialDelay)
	seen := 0
	for _, d := range rc.datagrams() {
		for i, cid := range d.cids {
			seen++
			if !javaClaimable(cid) {
				t.Fatalf("%s searched with CID %#x: a Java server takes it for a ping (int32 %d)", d.names[i], cid, int32(cid))
			}
		}
	}
	if seen != n {
		t.Fatalf("%d names searched, want %d", seen, n)
	}
}
