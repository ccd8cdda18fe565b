package udpsearch

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// recv waits for at least one datagram and returns how many arrived: one
// batch, for tests that drive a socket step by step (it allocates; the
// daemon's loop is serve).
func (r *rxBatch) recv(rc syscall.RawConn) (int, error) {
	r.n, r.errno = 0, 0
	if err := rc.Read(r.recvmmsg); err != nil {
		return 0, err
	}
	if r.errno != 0 {
		return 0, r.errno
	}
	return r.n, nil
}

// TestServeReceivesEveryDatagram: serve reads a queue longer than its
// batch in full batches (asking again at once after each), goes back to
// waiting after a short batch without asking the kernel again, and is
// still woken by every datagram that arrives later, one at a time or in
// bursts, with each datagram's bytes and source intact; closing the
// socket ends it.
func TestServeReceivesEveryDatagram(t *testing.T) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	to := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	client, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	from := client.LocalAddr().(*net.UDPAddr).AddrPort()
	rc, _ := conn.SyscallConn()
	rb := newRxBatch(4, maxDatagram)
	got := make(chan int, 1024)
	batches := make(chan int, 1024)
	done := make(chan error, 1)
	seq := 0
	expect := func(n int) {
		t.Helper()
		for range n {
			select {
			case v := <-got:
				if v != seq%256 {
					t.Fatalf("datagram %d: got %d", seq, v)
				}
				seq++
			case <-time.After(5 * time.Second):
				t.Fatalf("datagram %d not received", seq)
			}
		}
	}
	send := func(n int) {
		for i := range n {
			if _, err := client.WriteToUDPAddrPort([]byte{0xAB, byte(seq + i)}, to); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Queued before serve starts: read 4, 4 and 3 at a time.
	send(11)
	go func() {
		var d datagram
		var drops uint32
		var have bool
		done <- rb.serve(rc, func(k int) {
			batches <- k
			for i := range k {
				if !rb.fill(i, &d, &drops, &have) || d.src != from || len(d.b) != 2 || d.b[0] != 0xAB {
					got <- -1
					continue
				}
				got <- int(d.b[1])
			}
		})
	}()
	expect(11)
	if b := []int{<-batches, <-batches, <-batches}; b[0] != 4 || b[1] != 4 || b[2] != 3 {
		t.Fatalf("11 queued datagrams read in batches %v, want [4 4 3]", b)
	}
	// One at a time, each after the loop went back to waiting.
	for range 20 {
		send(1)
		expect(1)
		time.Sleep(time.Millisecond)
	}
	// Bursts of 1 to 11 datagrams against a batch of 4.
	for n := 1; n <= 11; n++ {
		send(n)
		expect(n)
	}
	conn.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("serve ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not end when the socket closed")
	}
}
