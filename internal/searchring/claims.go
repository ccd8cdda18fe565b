package searchring

import (
	"net/netip"

	"github.com/pvans-project/pvans/internal/pva"
)

// Claims: which names a server has shown it may hold. A server that cannot
// be listed is asked directly only about waiting names it answered for
// before (SearchingAt), never about every name any client waits for: one
// beacon would otherwise get a host the whole waiting set, and a chance to
// answer for names it never held.

// defaultMaxClaims bounds the claims remembered when the ring has no
// Channel bound (the daemon's is searchring.DefaultMaxChannels).
const defaultMaxClaims = 10000

type claimKey struct {
	ep   netip.AddrPort
	name string
}

// claims remembers (endpoint, name) pairs the ring resolved, oldest
// forgotten first beyond the bound. Guarded by Ring.mu.
type claims struct {
	set   map[claimKey]struct{}
	queue []claimKey // oldest first, from head
	head  int
}

// add remembers that ep claimed name, within max pairs in all.
func (c *claims) add(ep netip.AddrPort, name string, max int, forgotten func()) {
	k := claimKey{ep, name}
	if c.set == nil {
		c.set = make(map[claimKey]struct{})
	}
	if _, ok := c.set[k]; ok {
		return
	}
	for len(c.set) >= max && c.head < len(c.queue) {
		delete(c.set, c.queue[c.head])
		c.queue[c.head] = claimKey{}
		c.head++
		forgotten()
	}
	if c.head > 0 && c.head >= len(c.queue)/2 {
		n := copy(c.queue, c.queue[c.head:])
		clear(c.queue[n:])
		c.queue, c.head = c.queue[:n], 0
	}
	c.queue = append(c.queue, k)
	c.set[k] = struct{}{}
}

func (c *claims) has(ep netip.AddrPort, name string) bool {
	_, ok := c.set[claimKey{ep, name}]
	return ok
}

func (r *Ring) maxClaims() int {
	if r.maxCh > 0 {
		return r.maxCh
	}
	return defaultMaxClaims
}

// SearchingAt lists the names being searched that the server at ep has
// claimed before (the ring resolved them to ep), with their CIDs, so the
// caller can ask that server about them directly, and the sequence ID to
// ask with: a reply is matched through OnReply like any other (sequence ID
// and CID), so the caller must send exactly that one. names are Want's
// Channels, namesTLS WantTLS's: those must be asked with TLSProtocols, as
// the ring searches them, since a "tcp" answer to a TLS Channel says the
// server has no TLS endpoint (ResolvedTLS) — asked plainly, a Secure
// PVAccess server would answer "tcp", and its TLS clients would be named
// its plaintext endpoint. The names are copies; none means nothing to ask.
func (r *Ring) SearchingAt(ep netip.AddrPort) (seq uint32, names, namesTLS []pva.SearchName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ch := range r.byName {
		if ch.state == stSearching && r.claims.has(ep, ch.name) {
			if names == nil && namesTLS == nil {
				seq = r.nextSeq
				r.nextSeq++
			}
			ch.sentWith(seq)
			sn := pva.SearchName{CID: ch.cid, Name: []byte(ch.name)}
			if ch.tls {
				namesTLS = append(namesTLS, sn)
			} else {
				names = append(names, sn)
			}
		}
	}
	return seq, names, namesTLS
}

func (r *Ring) forgotClaim() { r.ctr.claimsForgotten.Add(1) }
