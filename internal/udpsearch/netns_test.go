//go:build linux

package udpsearch

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/testutil"
)

// Network namespace helpers. Everything here sends only inside
// namespaces the test creates; nothing touches the host's interfaces.

var nsSeq atomic.Int32

type netns struct{ *testutil.Netns }

// newNetns creates a namespace with lo up, multicast on and a route for
// 224.0.0.0/4 on lo; it is deleted (with its veths) when the test ends.
func newNetns(t *testing.T) *netns {
	t.Helper()
	testutil.RequireNetns(t, "network namespace tests")
	return &netns{testutil.NewNetns(t, fmt.Sprintf("pvans-t%d-%d", os.Getpid(), nsSeq.Add(1)))}
}

// interfaces lists the namespace's interfaces (an Options.ListInterfaces).
func (n *netns) interfaces() ([]Interface, error) {
	var ifs []Interface
	err := n.Do(func() (err error) { ifs, err = ReadInterfaces(); return })
	return ifs, err
}

// veth links namespace a (address aAddr, a prefix) to b (bAddr).
func veth(t *testing.T, a *netns, aAddr string, b *netns, bAddr string) {
	t.Helper()
	i := nsSeq.Add(1)
	testutil.Veth(t, a.Netns, fmt.Sprintf("pva%d", i), []string{aAddr + " brd +"},
		b.Netns, fmt.Sprintf("pvb%d", i), []string{bAddr + " brd +"})
}

// startServer builds a server and has it listen and start inside the
// namespace.
func startServer(t *testing.T, n *netns, o Options) *Server {
	t.Helper()
	if o.ListInterfaces == nil {
		o.ListInterfaces = n.interfaces
	}
	s := New(withProduction(o))
	if err := n.Do(func() error {
		if err := s.Listen(); err != nil {
			return err
		}
		s.Start()
		return nil
	}); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// withProduction gives o the production values (config.Defaults) of the
// settings it leaves zero, as the daemon passes them: a flood of beacons
// needs the receive buffer and the queue to the tracker.
func withProduction(o Options) Options {
	c := config.Defaults()
	if o.ReceiveBuffer == 0 {
		o.ReceiveBuffer = int(c.UDP.ReceiveBufferBytes)
	}
	if o.BeaconQueue == 0 {
		o.BeaconQueue = DefaultBeaconQueue
	}
	if o.ReplyQueueBytes == 0 {
		o.ReplyQueueBytes = DefaultReplyQueueBytes
	}
	return o
}

// udpIn opens a plain UDP socket in the namespace.
func udpIn(t *testing.T, n *netns, addr string) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := n.Do(func() error {
		pc, err := net.ListenPacket("udp4", addr)
		if err == nil {
			c = pc.(*net.UDPConn)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func setSockInt(t *testing.T, c *net.UDPConn, level, opt, v int) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), level, opt, v) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
}

// groupSender makes c send multicast through 127.0.0.1, as forwarders do.
func groupSender(t *testing.T, c *net.UDPConn) {
	t.Helper()
	rc, _ := c.SyscallConn()
	var serr error
	rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInet4Addr(int(fd), unix.IPPROTO_IP, unix.IP_MULTICAST_IF, loopback4)
	})
	if serr != nil {
		t.Fatal(serr)
	}
}

type rxMsg struct {
	b    []byte
	from netip.AddrPort
}

// collect reads datagrams from c until quiet has passed with none, or max
// arrived (then waits quiet more for extras, so duplicates are seen).
func collect(c *net.UDPConn, quiet time.Duration, max int) []rxMsg {
	var out []rxMsg
	buf := make([]byte, 65536)
	for {
		c.SetReadDeadline(time.Now().Add(quiet))
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return out
		}
		out = append(out, rxMsg{append([]byte(nil), buf[:n]...), from})
		if max > 0 && len(out) > max {
			return out
		}
	}
}

// pvxsLike is a tiny PVXS-style server for tests, built on internal/pva:
// it shares the search port (same socket options as PVXS), forwards
// unicast searches to the loopback group, and answers broadcasts and
// forwarded copies (never the unicast itself) for the names it holds,
// with its GUID, a zero address and its TCP port.
type pvxsLike struct {
	conn    *net.UDPConn
	guid    pva.GUID
	tcpPort uint16
	names   map[string]bool
	local   map[netip.Addr]bool
	wg      sync.WaitGroup
}

func startPVXSLike(t *testing.T, n *netns, port uint16, guid pva.GUID, tcpPort uint16, names ...string) *pvxsLike {
	t.Helper()
	ifs, err := n.interfaces()
	if err != nil {
		t.Fatal(err)
	}
	p := &pvxsLike{guid: guid, tcpPort: tcpPort, names: map[string]bool{}, local: map[netip.Addr]bool{}}
	for _, nm := range names {
		p.names[nm] = true
	}
	for _, it := range ifs {
		for _, pf := range it.Prefixes {
			p.local[pf.Addr()] = true
		}
	}
	if err := n.Do(func() (err error) { p.conn, err = listenSearchPort(port, 1<<20); return }); err != nil {
		t.Fatal(err)
	}
	p.wg.Add(1)
	go p.loop(port)
	t.Cleanup(func() { p.conn.Close(); p.wg.Wait() })
	return p
}

func (p *pvxsLike) loop(port uint16) {
	defer p.wg.Done()
	rc, _ := p.conn.SyscallConn()
	rb := newRxBatch(8, maxDatagram)
	var d datagram
	var drops uint32
	var have bool
	var s pva.Search
	for {
		k, err := rb.recv(rc)
		if errors.Is(err, net.ErrClosed) {
			return
		} else if err != nil {
			continue
		}
		for i := 0; i < k; i++ {
			rb.fill(i, &d, &drops, &have)
			h, payload, rest, err := pva.SplitMessage(d.b)
			if err != nil {
				continue
			}
			forwarded := d.dst == ForwardGroup
			msg := d.b
			if h.Command == pva.CmdOriginTag {
				if !forwarded {
					continue
				}
				if h, payload, _, err = pva.SplitMessage(rest); err != nil {
					continue
				}
				msg = rest
			}
			if h.Command != pva.CmdSearch || s.Decode(payload, h.BigEndian()) != nil {
				continue
			}
			to := d.src.Addr()
			if !s.ReplyAddr.IsAny() {
				to = s.ReplyAddr.Addr()
			} else if forwarded {
				continue
			}
			if !forwarded && p.local[d.dst] {
				fw, err := pva.AppendForward(nil, pva.AddressFrom(d.dst), msg[:pva.HeaderSize+len(payload)], pva.AddressFrom(to))
				if err == nil {
					p.conn.WriteToUDPAddrPort(fw, netip.AddrPortFrom(ForwardGroup, port))
				}
				continue
			}
			var cids []uint32
			for _, nm := range s.Names {
				if p.names[string(nm.Name)] {
					cids = append(cids, nm.CID)
				}
			}
			if len(cids) == 0 && !s.MustReply() {
				continue
			}
			b := appendResponse(nil, p.guid, s.Seq, pva.AnyIPv4, p.tcpPort, "tcp", cids)
			p.conn.WriteToUDPAddrPort(b, netip.AddrPortFrom(to, s.ReplyPort))
		}
	}
}
