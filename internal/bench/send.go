package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
)

// sendLoop sends templates in turn, each with a fresh sequence ID, while
// the budget, the pacer, the window and sendCtx allow.
func sendLoop(sendCtx context.Context, st *stats, b *budget, tr *tracker, tmpl []template, p *pacer, write func([]byte) error) error {
	buf := make([]byte, 0, pva.MaxSearchBuffer)
	var seq uint32
	deadline, hasDeadline := sendCtx.Deadline()
	for i := 0; ; i++ {
		// The deadline is checked here as well as through sendCtx: on a
		// loaded machine the context's timer can fire late.
		if hasDeadline && !time.Now().Before(deadline) {
			return nil
		}
		if !b.take() || !p.wait(sendCtx) || !tr.acquire(sendCtx) {
			return nil
		}
		t := &tmpl[i%len(tmpl)]
		buf = append(buf[:0], t.msg...)
		binary.BigEndian.PutUint32(buf[seqOff:], seq)
		tr.sent(seq, time.Now())
		if err := write(buf); err != nil {
			return err
		}
		st.messages.Add(1)
		st.names.Add(int64(t.names))
		st.hits.Add(int64(t.hits))
		seq++
	}
}

// expireLoop frees timed-out window slots until done is closed.
func expireLoop(tr *tracker, timeout time.Duration, done <-chan struct{}) {
	tick := time.NewTicker(max(timeout/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			tr.expire(now, timeout)
		}
	}
}

// drain waits for outstanding replies, at most about one timeout.
func drain(ctx context.Context, tr *tracker, timeout time.Duration) {
	deadline := time.Now().Add(timeout + timeout/4 + 10*time.Millisecond)
	for tr.outstanding() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(2 * time.Millisecond)
	}
}

// handleReplies decodes every CMD_SEARCH_RESPONSE in b (a datagram or one
// framed TCP message) and records it.
func handleReplies(b []byte, tr *tracker, r *pva.SearchResponse) {
	now := time.Now()
	for len(b) > 0 {
		h, payload, rest, err := pva.SplitMessage(b)
		if err != nil {
			return
		}
		b = rest
		if h.Control() || h.Command != pva.CmdSearchResponse {
			continue
		}
		if r.Decode(payload, h.BigEndian()) == nil {
			tr.reply(r.Seq, len(r.CIDs), now)
		}
	}
}

func newPacer(rate float64, senders int) *pacer {
	p := &pacer{start: time.Now()}
	if rate > 0 {
		p.interval = time.Duration(float64(time.Second) * float64(senders) / rate)
	}
	return p
}

func runUDP(ctx context.Context, begin func() context.Context, cfg *Config, st *stats, b *budget) error {
	network := "udp4"
	if cfg.Target.Addr().Is6() && !cfg.Target.Addr().Is4In6() {
		network = "udp6"
	}
	uc, err := net.ListenUDP(network, nil)
	if err != nil {
		return err
	}
	defer uc.Close()
	_ = uc.SetReadBuffer(4 << 20)
	flags := uint8(pva.SearchUnicast)
	if cfg.MustReply {
		flags |= pva.SearchMustReply
	}
	tmpl, err := buildTemplates(cfg, uint16(uc.LocalAddr().(*net.UDPAddr).Port), flags)
	if err != nil {
		return err
	}
	tr := newTracker(cfg.Window, st)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		var r pva.SearchResponse
		for {
			n, _, err := uc.ReadFromUDPAddrPort(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			handleReplies(buf[:n], tr, &r)
		}
	}()
	go func() {
		defer wg.Done()
		expireLoop(tr, cfg.Timeout, done)
	}()
	target := cfg.Target
	sendCtx := begin()
	err = sendLoop(sendCtx, st, b, tr, tmpl, newPacer(cfg.Rate, 1), func(m []byte) error {
		_, err := uc.WriteToUDPAddrPort(m, target)
		return err
	})
	st.endSend()
	drain(ctx, tr, cfg.Timeout)
	close(done)
	uc.Close()
	wg.Wait()
	return err
}

func runTCP(ctx context.Context, begin func() context.Context, cfg *Config, st *stats, b *budget) error {
	// TCP searches: Unicast flag and reply port 0, as PVXS sends them to a
	// name server.
	flags := uint8(pva.SearchUnicast)
	if cfg.MustReply {
		flags |= pva.SearchMustReply
	}
	tmpl, err := buildTemplates(cfg, 0, flags)
	if err != nil {
		return err
	}
	conns := make([]net.Conn, 0, cfg.Conns)
	readers := make([]*bufio.Reader, 0, cfg.Conns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range cfg.Conns {
		nc, br, err := DialPVA(ctx, cfg.Target)
		if err != nil {
			return err
		}
		conns = append(conns, nc)
		readers = append(readers, br)
	}
	var (
		swg, rwg sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	setErr := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}
	done := make(chan struct{})
	trackers := make([]*tracker, len(conns))
	sendCtx := begin()
	for i, nc := range conns {
		tr := newTracker(cfg.Window, st)
		trackers[i] = tr
		rwg.Add(2)
		go func(br *bufio.Reader) {
			defer rwg.Done()
			var r pva.SearchResponse
			for {
				msg, err := ReadMessage(br)
				if err != nil {
					return
				}
				handleReplies(msg, tr, &r)
			}
		}(readers[i])
		go func() {
			defer rwg.Done()
			expireLoop(tr, cfg.Timeout, done)
		}()
		swg.Add(1)
		go func(nc net.Conn, offset int) {
			defer swg.Done()
			// Connections start at different templates so they do not all
			// search the same names at once.
			rot := append(append([]template(nil), tmpl[offset:]...), tmpl[:offset]...)
			err := sendLoop(sendCtx, st, b, tr, rot, newPacer(cfg.Rate, len(conns)), func(m []byte) error {
				_, err := nc.Write(m)
				return err
			})
			if err != nil {
				setErr(err)
			}
		}(nc, i*len(tmpl)/len(conns))
	}
	swg.Wait()
	st.endSend()
	for _, tr := range trackers {
		drain(ctx, tr, cfg.Timeout)
	}
	close(done)
	for _, c := range conns {
		c.Close()
	}
	rwg.Wait()
	return firstErr
}

// ReadMessage reads one framed message (header + payload; control
// messages have none).
func ReadMessage(br *bufio.Reader) ([]byte, error) {
	hb, err := br.Peek(pva.HeaderSize)
	if err != nil {
		return nil, err
	}
	h, err := pva.DecodeHeader(hb)
	if err != nil {
		return nil, err
	}
	n := pva.HeaderSize + int(h.PayloadLen())
	if h.PayloadLen() > 16<<20 {
		return nil, fmt.Errorf("bench: message of %d bytes", h.PayloadLen())
	}
	msg := make([]byte, n)
	_, err = io.ReadFull(br, msg)
	return msg, err
}

// DialPVA connects and does the client side of the handshake: wait for
// the server's CONNECTION_VALIDATION, answer "anonymous", wait for
// CONNECTION_VALIDATED. Read messages from the returned reader with
// ReadMessage; test/perf's clients speak PVA over TCP with both.
func DialPVA(ctx context.Context, addr interface{ String() string }) (net.Conn, *bufio.Reader, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr.String())
	if err != nil {
		return nil, nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReaderSize(nc, 256<<10)
	fail := func(err error) (net.Conn, *bufio.Reader, error) {
		nc.Close()
		return nil, nil, fmt.Errorf("bench: handshake with %s: %w", addr, err)
	}
	var order uint8 // the byte order the server announced; we answer in it
	for validated := false; !validated; {
		msg, err := ReadMessage(br)
		if err != nil {
			return fail(err)
		}
		h, payload, _, _ := pva.SplitMessage(msg)
		switch {
		case h.Control():
			if h.Command == pva.CtrlSetByteOrder {
				order = h.Flags & pva.FlagBigEndian
			}
		case h.Command == pva.CmdConnectionValidation:
			_, err := nc.Write(pva.AppendClientValidation(nil, order, &pva.ClientValidation{
				BufferSize: pva.DefaultBufferSize, RegistrySize: pva.DefaultRegistrySize, AuthMethod: "anonymous"}))
			if err != nil {
				return fail(err)
			}
		case h.Command == pva.CmdConnectionValidated:
			if _, err := pva.DecodeConnectionValidated(payload, h.BigEndian()); err != nil {
				return fail(err)
			}
			validated = true
		}
	}
	_ = nc.SetDeadline(time.Time{})
	return nc, br, nil
}
