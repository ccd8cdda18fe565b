// Package nsclient asks a PVA name server (pvans, or any PVXS server) over
// TCP which server holds some names, the way a PVXS client with
// EPICS_PVA_NAME_SERVERS does: handshake, one big-endian CMD_SEARCH with
// the Unicast flag and reply port 0, then collect CMD_SEARCH_RESPONSEs,
// correlated by CID, for as long as the caller is willing to wait (a name
// server may push an answer later). It backs `pvans query` and the tests.
package nsclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
)

// Answer is one resolved name.
type Answer struct {
	Name     string
	CID      uint32
	GUID     pva.GUID
	Endpoint netip.AddrPort // address "any" and port 0 resolved against the name server
	Protocol string
	At       time.Duration // time from sending the search to the answer
}

// FirstCID is where CIDs start, like every PVXS client.
const FirstCID = 0x12345678

// Client is one connection to a name server.
type Client struct {
	conn    *pvaconn.Conn
	server  netip.AddrPort
	mu      sync.Mutex
	byCID   map[uint32]string
	answers map[string]Answer
	sent    time.Time
	update  chan struct{}
	nextCID uint32
	resp    pva.SearchResponse

	// Protocols is the protocol list of the searches (nil: ["tcp"], a
	// plain PVXS client; ["tls","tcp"] is one with a keychain). Set it
	// before Search.
	Protocols []string
}

// Dial connects and completes the PVA handshake.
func Dial(ctx context.Context, server netip.AddrPort) (*Client, error) {
	return DialWith(ctx, server, Options{})
}

// Options say how DialWith connects.
type Options struct {
	// From is the local address (tests acting as several clients on one
	// host use 127.0.0.x); zero: the system's choice.
	From netip.Addr
	// TLS, if set, connects over TLS, as a PVXS client does for
	// EPICS_PVA_NAME_SERVERS=pvas://host:port.
	TLS *tls.Config
}

// DialWith is Dial with Options.
func DialWith(ctx context.Context, server netip.AddrPort, opt Options) (*Client, error) {
	c := &Client{server: server, byCID: map[uint32]string{}, answers: map[string]Answer{}, update: make(chan struct{}, 1), nextCID: FirstCID}
	// pvaconn's timeouts are a PVA client's; only the message bound is
	// ours: a name server's answers are small.
	conn, err := pvaconn.Dial(ctx, server, pvaconn.Options{Role: pvaconn.Client, Local: opt.From,
		MaxMessage: 1 << 20, SendQueueBytes: 1 << 20, TLS: opt.TLS}, c)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Done is closed when the connection has ended (closed by either side).
func (c *Client) Done() <-chan struct{} { return c.conn.Done() }

// Search sends names (packed into as many messages as PVXS would) and
// returns at once; answers are collected as they come.
func (c *Client) Search(names []string) error {
	c.mu.Lock()
	q := make([]pva.SearchName, 0, len(names))
	for _, n := range names {
		cid := c.nextCID
		c.nextCID++
		c.byCID[cid] = n
		q = append(q, pva.SearchName{CID: cid, Name: []byte(n)})
	}
	c.sent = time.Now()
	c.mu.Unlock()
	p := pva.NewSearchPacker(0)
	p.Flags = pva.SearchUnicast
	if c.Protocols != nil {
		p.Protocols = c.Protocols
	}
	var sendErr error
	err := p.Pack(q, func(d []byte) {
		if e := c.conn.Send(d); e != nil && sendErr == nil {
			sendErr = e
		}
	})
	return errors.Join(err, sendErr)
}

// Message collects search responses.
func (c *Client) Message(conn *pvaconn.Conn, h pva.Header, payload []byte) {
	if h.Command != pva.CmdSearchResponse {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.resp.Decode(payload, h.BigEndian()); err != nil || !c.resp.Found {
		return
	}
	ep := netip.AddrPortFrom(c.resp.Addr.Addr(), c.resp.Port)
	if c.resp.Addr.IsAny() {
		ep = netip.AddrPortFrom(c.server.Addr(), ep.Port())
	}
	if ep.Port() == 0 {
		ep = netip.AddrPortFrom(ep.Addr(), c.server.Port())
	}
	for _, cid := range c.resp.CIDs {
		name, ok := c.byCID[cid]
		if !ok {
			continue
		}
		if _, dup := c.answers[name]; dup {
			continue // first reply wins
		}
		c.answers[name] = Answer{Name: name, CID: cid, GUID: c.resp.GUID, Endpoint: ep, Protocol: string(c.resp.Protocol), At: time.Since(c.sent)}
	}
	select {
	case c.update <- struct{}{}:
	default:
	}
}

// Forget drops the answers to names, as a client does whose connection
// to the server named failed: it goes on searching them under the same
// CIDs, and the next reply for them counts (Wait waits for it).
func (c *Client) Forget(names ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		delete(c.answers, n)
	}
}

// Wait returns once every name searched so far is answered, or ctx ends;
// it returns what was answered and the names still unresolved.
func (c *Client) Wait(ctx context.Context) (answers []Answer, unresolved []string, err error) {
	for {
		c.mu.Lock()
		done := len(c.answers) == len(c.byCID)
		c.mu.Unlock()
		if done {
			break
		}
		select {
		case <-c.update:
			continue
		case <-c.conn.Done():
			err = fmt.Errorf("name server closed the connection: %w", c.conn.Err())
		case <-ctx.Done():
		}
		break
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for cid := uint32(FirstCID); cid < c.nextCID; cid++ {
		n := c.byCID[cid]
		if a, ok := c.answers[n]; ok && a.CID == cid {
			answers = append(answers, a)
		} else if !ok {
			unresolved = append(unresolved, n)
		}
	}
	return answers, unresolved, err
}
