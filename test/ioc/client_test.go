package ioc

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/sim"
)

// pvClient is a minimal PVA client for one channel, built on pvaconn
// (client role), the pva codec and the client's side of the operations
// (ops_test.go): what pvxinfo, pvxget, pvxput and pvxmonitor send, one
// operation at a time. Replies are decoded in the
// test's goroutine, in arrival order (the type cache needs that).
type pvClient struct {
	t     *testing.T
	conn  *pvaconn.Conn
	msgs  chan rxMsg
	types pva.TypeCache
	sid   uint32
	ioid  uint32
}

type rxMsg struct {
	h pva.Header
	p []byte
}

func (c *pvClient) Message(_ *pvaconn.Conn, h pva.Header, p []byte) {
	select {
	case c.msgs <- rxMsg{h, slices.Clone(p)}:
	default: // the test stopped reading: drop rather than stall the connection
	}
}

// connect opens a connection to a PV server and creates channel name.
func connect(t *testing.T, server netip.AddrPort, name string) *pvClient {
	t.Helper()
	c := &pvClient{t: t, msgs: make(chan rxMsg, 256), ioid: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pvaconn.Dial(ctx, server, pvaconn.Options{}, c)
	if err != nil {
		t.Fatalf("connect to %s: %v", server, err)
	}
	c.conn = conn
	t.Cleanup(func() { conn.Close() })
	c.send(pva.AppendCreateChannel(nil, c.conn.Flags(), &pva.CreateChannel{Channels: []pva.ChannelRequest{{CID: 0x12345678, Name: name}}}))
	var r pva.CreateChannelReply
	h, p := c.read(pva.CmdCreateChannel)
	if err := r.Decode(p, h.BigEndian()); err != nil || !r.Status.OK() {
		t.Fatalf("CREATE_CHANNEL %s: %+v %v", name, r, err)
	}
	c.sid = r.SID
	return c
}

func (c *pvClient) send(b []byte) {
	c.t.Helper()
	if err := c.conn.Send(b); err != nil {
		c.t.Fatal(err)
	}
}

// read returns the next message, which must be cmd.
func (c *pvClient) read(cmd pva.Command) (pva.Header, []byte) {
	c.t.Helper()
	select {
	case m := <-c.msgs:
		if m.h.Command != cmd {
			c.t.Fatalf("got %v, want %v", m.h.Command, cmd)
		}
		return m.h, m.p
	case <-c.conn.Done():
		c.t.Fatalf("connection closed waiting for %v: %v", cmd, c.conn.Err())
	case <-time.After(10 * time.Second):
		c.t.Fatalf("no %v within 10 s", cmd)
	}
	panic("unreachable")
}

var defaultPVRequest = pva.NewValue(pva.Struct("", pva.M("field", pva.Struct(""))))

// info is pvxinfo: GET_FIELD with an empty sub-field.
func (c *pvClient) info() *pva.FieldDesc {
	c.t.Helper()
	c.ioid++
	c.send(getFieldRequest(c.conn.Flags(), c.sid, c.ioid))
	h, p := c.read(pva.CmdGetField)
	var r opReply
	if err := r.decode(h, p, &c.types, nil); err != nil || !r.Status.OK() || r.IOID != c.ioid {
		c.t.Fatalf("GET_FIELD %+v %v", r, err)
	}
	return r.Type
}

// get is pvxget: GET INIT, EXEC, DESTROY_REQUEST.
func (c *pvClient) get() *pva.Value {
	c.t.Helper()
	c.ioid++
	f := c.conn.Flags()
	c.send(opRequest(f, pva.CmdGet, c.sid, c.ioid, pva.SubcmdInit, defaultPVRequest, nil, nil))
	h, p := c.read(pva.CmdGet)
	var r opReply
	if err := r.decode(h, p, &c.types, nil); err != nil || !r.Status.OK() {
		c.t.Fatalf("GET INIT %+v %v", r, err)
	}
	typ := r.Type
	c.send(opRequest(f, pva.CmdGet, c.sid, c.ioid, pva.SubcmdExec, nil, nil, nil))
	h, p = c.read(pva.CmdGet)
	if err := r.decode(h, p, &c.types, typ); err != nil || !r.Status.OK() {
		c.t.Fatalf("GET EXEC %+v %v", r, err)
	}
	c.send(pva.AppendRequestRef(nil, f, pva.CmdDestroyRequest, &pva.RequestRef{SID: c.sid, IOID: c.ioid}))
	return r.Value
}

// put is pvxput: PUT INIT, EXEC with the value field only, DESTROY_REQUEST.
func (c *pvClient) put(x float64) {
	c.t.Helper()
	c.ioid++
	f := c.conn.Flags()
	c.send(opRequest(f, pva.CmdPut, c.sid, c.ioid, pva.SubcmdInit, defaultPVRequest, nil, nil))
	h, p := c.read(pva.CmdPut)
	var r opReply
	if err := r.decode(h, p, &c.types, nil); err != nil || !r.Status.OK() {
		c.t.Fatalf("PUT INIT %+v %v", r, err)
	}
	v := pva.NewValue(r.Type)
	v.Field("value").Float = x
	var changed pva.BitSet
	changed.Set(1) // NTScalar: value is the first member, bit 1
	c.send(opRequest(f, pva.CmdPut, c.sid, c.ioid, pva.SubcmdExec, nil, changed, v))
	h, p = c.read(pva.CmdPut)
	if err := r.decode(h, p, &c.types, r.Type); err != nil || !r.Status.OK() {
		c.t.Fatalf("PUT EXEC %+v %v", r, err)
	}
	c.send(pva.AppendRequestRef(nil, f, pva.CmdDestroyRequest, &pva.RequestRef{SID: c.sid, IOID: c.ioid}))
}

// monitor is pvxmonitor: INIT, START, then n updates; it returns their
// values, and stops and destroys the subscription.
func (c *pvClient) monitor(n int) []float64 {
	c.t.Helper()
	c.ioid++
	f := c.conn.Flags()
	c.send(opRequest(f, pva.CmdMonitor, c.sid, c.ioid, pva.SubcmdInit, defaultPVRequest, nil, nil))
	h, p := c.read(pva.CmdMonitor)
	var r opReply
	if err := r.decode(h, p, &c.types, nil); err != nil || !r.init() || !r.Status.OK() {
		c.t.Fatalf("MONITOR INIT %+v %v", r, err)
	}
	typ := r.Type
	c.send(opRequest(f, pva.CmdMonitor, c.sid, c.ioid, sim.SubcmdMonitorStart, nil, nil, nil))
	var got []float64
	for len(got) < n {
		h, p := c.read(pva.CmdMonitor)
		if err := r.decode(h, p, &c.types, typ); err != nil || r.finish() {
			c.t.Fatalf("MONITOR update %+v %v", r, err)
		}
		got = append(got, r.Value.Field("value").Float)
	}
	c.send(opRequest(f, pva.CmdMonitor, c.sid, c.ioid, sim.SubcmdMonitorStartStop|pva.SubcmdDestroy, nil, nil, nil))
	return got
}

func (c *pvClient) String() string { return fmt.Sprintf("client of %s", c.conn.Remote()) }

// monitorUntil subscribes and returns the values seen up to the first
// for which stop is true. Only for use from a goroutine that owns c.
func (c *pvClient) monitorUntil(stop func(float64) bool) []float64 {
	c.ioid++
	f := c.conn.Flags()
	_ = c.conn.Send(opRequest(f, pva.CmdMonitor, c.sid, c.ioid, pva.SubcmdInit, defaultPVRequest, nil, nil))
	var typ *pva.FieldDesc
	var r opReply
	var got []float64
	for m := range c.msgs {
		if m.h.Command != pva.CmdMonitor || r.decode(m.h, m.p, &c.types, typ) != nil {
			return got
		}
		if r.init() {
			typ = r.Type
			_ = c.conn.Send(opRequest(f, pva.CmdMonitor, c.sid, c.ioid, sim.SubcmdMonitorStart, nil, nil, nil))
			continue
		}
		v := r.Value.Field("value").Float
		got = append(got, v)
		if stop(v) {
			return got
		}
	}
	return got
}
