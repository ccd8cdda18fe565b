package probe

import (
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"net/netip"

	"github.com/pvans-project/pvans/internal/pva"
)

// StaticGUID is the identity reported for a server whose GUID is unknown
// (a static server that did not answer the TCP discovery ping, or a static
// name file): the first 12 bytes of SHA-256 of "pvans static " + endpoint,
// stable across daemon restarts.
func StaticGUID(ep netip.AddrPort) pva.GUID {
	sum := sha256.Sum256([]byte("pvans static " + ep.String()))
	return pva.GUID(sum[:12])
}

func (s *server) reportGUID() pva.GUID {
	if s.life.id.guid.IsZero() {
		return StaticGUID(s.ep)
	}
	return s.life.id.guid
}

// pingSeq registers cl's ping under a fresh random sequence ID.
func (p *Prober) pingSeq(cl *client) uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		// From crypto/rand, not p.rnd: the sequence ID is what proves a
		// UDP answer saw the TCP ping, and p.rnd (seeded from the start
		// time, and showing in the jitter) can be predicted.
		var b [4]byte
		_, _ = crand.Read(b[:])
		seq := binary.LittleEndian.Uint32(b[:])
		if _, taken := p.pings[seq]; seq != 0 && seq != tlsSeq && !taken {
			p.pings[seq] = cl
			return seq
		}
	}
}

func (p *Prober) pingDone(cl *client) {
	p.mu.Lock()
	if seq := cl.seq.Load(); p.pings[seq] == cl {
		delete(p.pings, seq)
	}
	p.mu.Unlock()
}

// PingAnswer takes a discovery answer heard over UDP (no names) if it
// answers a ping of ours: its sequence ID, random and sent only over the
// TCP connection, matches, and it comes from the address pinged. It
// reports whether it was ours; the caller ignores it then.
func (p *Prober) PingAnswer(from netip.AddrPort, m *pva.SearchResponse) bool {
	p.mu.Lock()
	cl := p.pings[m.Seq]
	if cl == nil || from.Addr().Unmap() != cl.s.ep.Addr().Unmap() {
		p.mu.Unlock()
		return false
	}
	delete(p.pings, m.Seq)
	p.stats.PingsOverUDP.Add(1)
	p.mu.Unlock()
	cl.answeredOverUDP(m.GUID)
	return true
}
