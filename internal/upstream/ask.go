package upstream

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
)

// Asking one server directly. Every PVXS server answers CMD_SEARCH on any
// TCP connection (it is its own name server: docs/protocol.md, "Searches
// over TCP at a server"), so when a new server cannot be listed, the names
// clients are waiting for can be put to it at once instead of waiting for
// the search ring to come round to them (up to 6 s even after a hurry-up).
// A pvAccessCPP server answers a TCP search over UDP, to the body's reply
// port: the search carries the client socket's port for it, and is written
// in the byte order the server announced, since pvAccessCPP reads a whole
// connection in one order (docs/protocol.md, "Byte order").
const (
	// MaxAsks bounds the servers asked at once; more are refused.
	MaxAsks = 16
	// AskWait is how long an asked server has to answer before the
	// connection is closed (negative answers are never sent).
	AskWait = 2 * time.Second
	// askChunk bounds one search message's names, in bytes.
	askChunk = 16 << 10
)

type asks struct {
	mu      sync.Mutex
	running int
	asked   metrics.Counter `metric:"pvans_upstream_asks_total" label:"result=asked" help:"Servers that refused to list their names asked directly over TCP for the names clients wait for, by result: asked, or refused because 16 asks were running."`
	refused metrics.Counter `metric:"pvans_upstream_asks_total" label:"result=refused"` // not asked: MaxAsks were running
}

// Ask puts names to server over a connection of its own, in searches with
// sequence ID seq (the search ring matches replies by it), hands each answer
// to OnAskReply (a pvAccessCPP server's UDP answers arrive at replyPort
// instead) and closes the connection after AskWait. names are plain
// clients' and go in searches listing "tcp"; namesTLS are TLS clients' and
// go in searches listing "tls" and "tcp", as the ring searched them. It
// returns false, asking nothing, when MaxAsks servers are being asked
// already or the pool is closed.
func (p *Pool) Ask(server netip.AddrPort, seq uint32, names, namesTLS []pva.SearchName, replyPort uint16) bool {
	if len(names)+len(namesTLS) == 0 {
		return false
	}
	// The WaitGroup is added to under p.mu, where Close marks the pool
	// closed before it waits.
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.asks.mu.Lock()
	if p.asks.running >= MaxAsks {
		p.asks.refused.Add(1)
		p.asks.mu.Unlock()
		return false
	}
	p.asks.running++
	p.asks.asked.Add(1)
	p.asks.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() {
			p.asks.mu.Lock()
			p.asks.running--
			p.asks.mu.Unlock()
		}()
		p.ask(server, seq, names, namesTLS, replyPort)
	}()
	return true
}

// Protocol lists of the asks: a TLS client's names are asked as a PVXS
// client with a keychain searches (searchring.TLSProtocols), so that a
// Secure PVAccess server names its TLS endpoint; asked with "tcp" alone it
// would answer "tcp", which says it has none.
var (
	askProtocols    = [][]byte{[]byte("tcp")}
	askTLSProtocols = [][]byte{[]byte("tls"), []byte("tcp")}
)

func (p *Pool) ask(server netip.AddrPort, seq uint32, names, namesTLS []pva.SearchName, replyPort uint16) {
	ctx, cancel := context.WithTimeout(p.ctx, AskWait)
	defer cancel()
	h := &askHandler{p: p, server: server}
	c, err := p.o.Dial(ctx, server, p.o.Conn, h)
	if err != nil {
		p.o.Logger.Debug("server not asked: unreachable", zap.Stringer("endpoint", server), zap.Error(err))
		return
	}
	defer c.Close()
	if !sendAsk(c, seq, names, askProtocols, replyPort) || !sendAsk(c, seq, namesTLS, askTLSProtocols, replyPort) {
		return
	}
	select {
	case <-ctx.Done():
	case <-c.Done():
	}
}

// sendAsk sends names in searches of at most about askChunk bytes; false
// when the connection failed.
func sendAsk(c *pvaconn.Conn, seq uint32, names []pva.SearchName, proto [][]byte, replyPort uint16) bool {
	for len(names) > 0 {
		n, size := 0, 0
		for n < len(names) && n < 0xFFFF && (n == 0 || size+pva.SearchNameCost(len(names[n].Name)) <= askChunk) {
			size += pva.SearchNameCost(len(names[n].Name))
			n++
		}
		msg := pva.AppendSearch(nil, c.Flags(), &pva.Search{Seq: seq, Flags: pva.SearchUnicast,
			ReplyPort: replyPort, Protocols: proto, Names: names[:n]})
		if c.Send(msg) != nil {
			return false
		}
		names = names[n:]
	}
	return true
}

// askHandler hands an asked server's answers to OnAskReply.
type askHandler struct {
	p      *Pool
	server netip.AddrPort
	mu     sync.Mutex
	reply  pva.SearchResponse
}

func (h *askHandler) Message(c *pvaconn.Conn, hd pva.Header, payload []byte) {
	if hd.Command != pva.CmdSearchResponse || h.p.o.OnAskReply == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.reply.Decode(payload, hd.BigEndian()); err != nil {
		_ = c.Close()
		return
	}
	h.p.o.OnAskReply(c.Remote(), &h.reply)
}
