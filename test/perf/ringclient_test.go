package perf

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvans-project/pvans/internal/bench"
	"github.com/pvans-project/pvans/internal/pva"
)

// ringClient searches names as a PVXS client's search ring does
// (src/client.cpp, tickSearch, PVXS 1.5), so the big-client figure can be
// repeated without a PVXS build:
//
//   - every name is searched at once at start (one "initial" tick); each
//     tick (1 s) searches the names of one of 30 buckets again, a name
//     searched n times moving n buckets on (at most 30), one bucket more
//     when the next one holds over 100 names more than the one after;
//   - searches are packed up to 1,400 bytes and each goes to every UDP
//     destination, from one socket with the OS default receive buffer;
//   - over TCP, in one tick, a search is appended to a name server's
//     connection only while that connection's output buffer holds
//     ≤ 64 KiB (the buffer is not drained during the tick: PVXS runs the
//     tick on the thread that writes the connection);
//   - with a name server, the client hurries up as its connection comes
//     up (30 ticks of 0.2 s that search names again only a revolution,
//     6 s, later; see run);
//   - a reply datagram is read for its first message only, and the
//     channels it names cost the client drain per name (PVXS opens each
//     channel before it reads the next datagram), so a burst beyond the
//     receive buffer is dropped by the kernel as it is for PVXS.
//
// A name counts as answered at its first reply; what the client would do
// next (connect to the server) is the floor, outside this figure.
type ringClient struct {
	names []string
	udp   *net.UDPConn
	dests []netip.AddrPort
	ns    []*nsConn
	drain time.Duration // per name answered

	// loop is PVXS's event loop thread: ticks and the processing of
	// replies (UDP and TCP) take turns on it.
	loop     sync.Mutex
	mu       sync.Mutex
	answered []bool
	nSearch  []uint8
	buckets  [nBuckets][]int32
	current  int

	left      atomic.Int64
	done      chan struct{}
	start     time.Time
	last      atomic.Int64 // ns after start of the last first answer
	searched  atomic.Int64 // names sent, over all destinations' first copy
	research  atomic.Int64 // names searched again (a tick after the first)
	udpSent   atomic.Int64 // datagrams
	tcpSent   atomic.Int64 // search messages appended to a name server
	tcpSkip   atomic.Int64 // search messages a name server's full buffer skipped
	viaTCP    atomic.Int64 // names first answered over TCP
	drops     int64        // the UDP socket's kernel drops when run ended
	closeOnce sync.Once
}

const (
	nBuckets         = 30
	maxSearchPayload = 1400
	nsBufferLimit    = 64 << 10
)

// nsConn is a connection to a name server with its own output buffer.
type nsConn struct {
	c   net.Conn
	br  *bufio.Reader
	mu  sync.Mutex // held by a tick: no drain meanwhile
	out []byte
	cv  *sync.Cond
}

// newRingClient opens the client; drainPerSec is how many answered
// names a second it processes (0: as fast as it reads).
// It searches over UDP from src (a loopback address): pvans' per-source
// limits start afresh for an address not used before.
func newRingClient(ctx context.Context, src netip.Addr, names []string, udpDests, nameServers []netip.AddrPort, drainPerSec float64) (*ringClient, error) {
	c := &ringClient{names: names, dests: udpDests, answered: make([]bool, len(names)),
		nSearch: make([]uint8, len(names)), done: make(chan struct{})}
	if drainPerSec > 0 {
		c.drain = time.Duration(float64(time.Second) / drainPerSec)
	}
	c.left.Store(int64(len(names)))
	var err error
	if c.udp, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0))); err != nil {
		return nil, err
	}
	for _, a := range nameServers {
		nc, br, err := bench.DialPVA(ctx, a)
		if err != nil {
			c.close()
			return nil, err
		}
		n := &nsConn{c: nc, br: br}
		n.cv = sync.NewCond(&n.mu)
		c.ns = append(c.ns, n)
	}
	return c, nil
}

// run searches until every name is answered or ctx ends; it reports
// whether all were.
func (c *ringClient) run(ctx context.Context) bool {
	c.start = time.Now()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.readUDP() }()
	for _, n := range c.ns {
		wg.Add(2)
		go func() { defer wg.Done(); c.writeNS(n) }()
		go func() { defer wg.Done(); c.readNS(n) }()
	}
	all := make([]int32, len(c.names))
	for i := range all {
		all[i] = int32(i)
	}
	c.tick(all, true, false)
	// A PVXS client whose name-server connection has come up hurries up
	// (ContextImpl::poke): its next 30 ticks come every 0.2 s, and each
	// files the names it searches back into the bucket it took them from,
	// so a name still unanswered is searched again only a revolution
	// later, at 6 s. Its connection is up before its first search here,
	// as it is for a client that starts its channels once its context is.
	poked := 0
	if len(c.ns) > 0 {
		poked = nBuckets
	}
	interval := func() time.Duration {
		if poked > 0 {
			return 200 * time.Millisecond
		}
		return time.Second
	}
	tk := time.NewTimer(interval())
	defer tk.Stop()
	ok := false
loop:
	for {
		select {
		case <-c.done:
			ok = true
			break loop
		case <-ctx.Done():
			break loop
		case <-tk.C:
			c.mu.Lock()
			idx := c.current
			c.current = (c.current + 1) % nBuckets
			b := c.buckets[idx]
			c.buckets[idx] = nil
			c.mu.Unlock()
			c.tick(b, false, poked > 0)
			poked = max(0, poked-1)
			tk.Reset(interval())
		}
	}
	c.drops = c.kernelDrops()
	c.close()
	wg.Wait()
	return ok
}

// tick sends one tick's searches for bucket (initial: the first search of
// every name) and files each name into the bucket it is searched in next
// (poked: the bucket it came from, as PVXS does while it hurries up).
func (c *ringClient) tick(bucket []int32, initial, poked bool) {
	c.loop.Lock()
	defer c.loop.Unlock()
	for _, n := range c.ns {
		n.mu.Lock()
	}
	defer func() {
		for _, n := range c.ns {
			n.cv.Signal()
			n.mu.Unlock()
		}
	}()
	c.mu.Lock()
	idx := c.current
	c.mu.Unlock()
	var names []pva.SearchName
	for len(bucket) > 0 {
		names = names[:0]
		size := pva.HeaderSize + 4 + 4 + 16 + 2 + 1 + 1 + 3 + 2
		c.mu.Lock()
		for len(bucket) > 0 {
			i := bucket[0]
			if c.answered[i] {
				bucket = bucket[1:]
				continue
			}
			if len(names) > 0 && size+4+1+len(c.names[i]) > maxSearchPayload {
				break
			}
			size += 4 + 1 + len(c.names[i])
			names = append(names, pva.SearchName{CID: uint32(i), Name: []byte(c.names[i])})
			bucket = bucket[1:]
			ninc := 0
			if !initial {
				c.research.Add(1)
			}
			if !initial && !poked {
				c.nSearch[i] = min(nBuckets, c.nSearch[i]+1)
				ninc = int(c.nSearch[i])
			}
			next := (idx + ninc) % nBuckets
			nextnext := (next + 1) % nBuckets
			if a, b := len(c.buckets[next]), len(c.buckets[nextnext]); a > b && a-b > 100 {
				next = nextnext
			}
			c.buckets[next] = append(c.buckets[next], i)
		}
		c.mu.Unlock()
		if len(names) == 0 {
			break
		}
		c.searched.Add(int64(len(names)))
		port := uint16(c.udp.LocalAddr().(*net.UDPAddr).Port)
		// PVXS's sequence ("find") and reply address (all zeros) on every
		// search: pvans pairs only searches in that form (twin.Fingerprint).
		msg := pva.AppendSearch(nil, pva.FlagBigEndian, &pva.Search{Seq: pva.SearchSeqFind, ReplyPort: port,
			Protocols: [][]byte{[]byte("tcp")}, Names: names})
		for _, d := range c.dests {
			if _, err := c.udp.WriteToUDPAddrPort(msg, d); err == nil {
				c.udpSent.Add(1)
			}
		}
		if len(c.ns) == 0 {
			continue
		}
		tcp := pva.AppendSearch(nil, pva.FlagBigEndian, &pva.Search{Seq: pva.SearchSeqFind, Flags: pva.SearchUnicast,
			Protocols: [][]byte{[]byte("tcp")}, Names: names})
		for _, n := range c.ns {
			if len(n.out) > nsBufferLimit {
				c.tcpSkip.Add(1)
				continue
			}
			n.out = append(n.out, tcp...)
			c.tcpSent.Add(1)
		}
	}
}

func (c *ringClient) writeNS(n *nsConn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for {
		for len(n.out) == 0 {
			select {
			case <-c.done:
				return
			default:
			}
			n.cv.Wait()
		}
		b := n.out
		n.out = nil
		n.mu.Unlock()
		_, err := n.c.Write(b)
		n.mu.Lock()
		if err != nil {
			return
		}
	}
}

func (c *ringClient) readUDP() {
	buf := make([]byte, 1<<16)
	var m pva.SearchResponse
	for {
		k, _, err := c.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		h, p, _, err := pva.SplitMessage(buf[:k])
		if err != nil || h.Command != pva.CmdSearchResponse || m.Decode(p, h.BigEndian()) != nil || !m.Found {
			continue
		}
		c.answer(m.CIDs, false)
	}
}

func (c *ringClient) readNS(n *nsConn) {
	var m pva.SearchResponse
	for {
		b, err := bench.ReadMessage(n.br)
		if err != nil {
			return
		}
		h, p, _, err := pva.SplitMessage(b)
		if err != nil || h.Control() || h.Command != pva.CmdSearchResponse || m.Decode(p, h.BigEndian()) != nil || !m.Found {
			continue
		}
		c.answer(m.CIDs, true)
	}
}

// answer marks cids answered and spends the client's time on them.
func (c *ringClient) answer(cids []uint32, tcp bool) {
	c.loop.Lock()
	defer c.loop.Unlock()
	fresh := 0
	c.mu.Lock()
	for _, id := range cids {
		if int(id) < len(c.answered) && !c.answered[id] {
			c.answered[id] = true
			fresh++
		}
	}
	c.mu.Unlock()
	if fresh == 0 {
		return
	}
	c.last.Store(int64(time.Since(c.start)))
	if tcp {
		c.viaTCP.Add(int64(fresh))
	}
	if c.drain > 0 {
		spin(time.Duration(fresh) * c.drain)
	}
	if c.left.Add(-int64(fresh)) == 0 {
		c.closeOnce.Do(func() { close(c.done) })
	}
}

// spin busy-waits d: a sleep of tens of microseconds lasts far longer,
// and the client's work per channel is CPU, not waiting.
func spin(d time.Duration) {
	for t := time.Now(); time.Since(t) < d; {
	}
}

func (c *ringClient) close() {
	c.closeOnce.Do(func() { close(c.done) })
	c.udp.Close()
	for _, n := range c.ns {
		n.c.Close()
		n.mu.Lock()
		n.cv.Broadcast()
		n.mu.Unlock()
	}
}

// kernelDrops is the receive-buffer drop count of the client's UDP
// socket (/proc/net/udp, by its local port), -1 if not found.
func (c *ringClient) kernelDrops() int64 {
	port := c.udp.LocalAddr().(*net.UDPAddr).Port
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return -1
	}
	want := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) >= 13 && strings.HasSuffix(f[1], want) {
			n, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
			return n
		}
	}
	return -1
}

// lastAnswer is when the last name was first answered, after start.
func (c *ringClient) lastAnswer() time.Duration { return time.Duration(c.last.Load()) }
