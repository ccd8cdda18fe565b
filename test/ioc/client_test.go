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
)

// pvClient is a minimal PVA client for one channel, built on pvaconn
// (client role) and the pva codec: what pvxinfo, pvxget, pvxput and
// pvxmonitor send, one operation at a time. Replies are decoded in the
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
	c.send(pva.AppendGetFieldRequest(nil, c.conn.Flags(), &pva.GetFieldRequest{SID: c.sid, IOID: c.ioid}))
	h, p := c.read(pva.CmdGetField)
	var r pva.GetFieldReply
	if err := r.Decode(p, h.BigEndian(), &c.types); err != nil || !r.Status.OK() || r.IOID != c.ioid {
		c.t.Fatalf("GET_FIELD %+v %v", r, err)
	}
	return r.Type
}

// get is pvxget: GET INIT, EXEC, DESTROY_REQUEST.
func (c *pvClient) get() *pva.Value {
	c.t.Helper()
	c.ioid++
	f := c.conn.Flags()
	c.send(pva.AppendGetRequest(nil, f, &pva.GetRequest{SID: c.sid, IOID: c.ioid, Subcmd: pva.SubcmdInit, PVRequest: defaultPVRequest}))
	h, p := c.read(pva.CmdGet)
	var r pva.GetReply
	if err := r.Decode(p, h.BigEndian(), &c.types, nil); err != nil || !r.Status.OK() {
		c.t.Fatalf("GET INIT %+v %v", r, err)
	}
	typ := r.Type
	c.send(pva.AppendGetRequest(nil, f, &pva.GetRequest{SID: c.sid, IOID: c.ioid}))
	h, p = c.read(pva.CmdGet)
	if err := r.Decode(p, h.BigEndian(), &c.types, typ); err != nil || !r.Status.OK() {
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
	c.send(pva.AppendPutRequest(nil, f, &pva.PutRequest{SID: c.sid, IOID: c.ioid, Subcmd: pva.SubcmdInit, PVRequest: defaultPVRequest}))
	h, p := c.read(pva.CmdPut)
	var r pva.PutReply
	if err := r.Decode(p, h.BigEndian(), &c.types, nil); err != nil || !r.Status.OK() {
		c.t.Fatalf("PUT INIT %+v %v", r, err)
	}
	v := pva.NewValue(r.Type)
	v.Field("value").Float = x
	var changed pva.BitSet
	changed.Set(1) // NTScalar: value is the first member, bit 1
	c.send(pva.AppendPutRequest(nil, f, &pva.PutRequest{SID: c.sid, IOID: c.ioid, Changed: changed, Value: v}))
	h, p = c.read(pva.CmdPut)
	if err := r.Decode(p, h.BigEndian(), &c.types, r.Type); err != nil || !r.Status.OK() {
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
	c.send(pva.AppendMonitorRequest(nil, f, &pva.MonitorRequest{SID: c.sid, IOID: c.ioid, Subcmd: pva.SubcmdInit, PVRequest: defaultPVRequest}))
	h, p := c.read(pva.CmdMonitor)
	var r pva.MonitorReply
	if err := r.Decode(p, h.BigEndian(), &c.types, nil); err != nil || !r.IsInit() || !r.Status.OK() {
		c.t.Fatalf("MONITOR INIT %+v %v", r, err)
	}
	typ := r.Type
	c.send(pva.AppendMonitorRequest(nil, f, &pva.MonitorRequest{SID: c.sid, IOID: c.ioid, Subcmd: pva.SubcmdMonitorStart}))
	var got []float64
	for len(got) < n {
		h, p := c.read(pva.CmdMonitor)
		if err := r.Decode(p, h.BigEndian(), &c.types, typ); err != nil || r.IsFinish() {
			c.t.Fatalf("MONITOR update %+v %v", r, err)
		}
		got = append(got, r.Value.Field("value").Float)
	}
	c.send(pva.AppendMonitorRequest(nil, f, &pva.MonitorRequest{SID: c.sid, IOID: c.ioid, Subcmd: pva.SubcmdMonitorStartStop | pva.SubcmdDestroy}))
	return got
}

func (c *pvClient) String() string { return fmt.Sprintf("client of %s", c.conn.Remote()) }

// monitorUntil subscribes and returns the values seen up to the first
// for which stop is true. Only for use from a goroutine that owns c.
func (c *pvClient) monitorUntil(stop func(float64) bool) []float64 {
	c.ioid++
	f := c.conn.Flags()
	_ = c.conn.Send(pva.AppendMonitorRequest(nil, f, &pva.MonitorRequest{SID: c.sid, IOID: c.ioid, Subcmd: pva.SubcmdInit, PVRequest: defaultPVRequest}))
	var typ *pva.FieldDesc
	var r pva.MonitorReply
	var got []float64
	for m := range c.msgs {
		if m.h.Command != pva.CmdMonitor || r.Decode(m.p, m.h.BigEndian(), &c.types, typ) != nil {
			return got
		}
		if r.IsInit() {
			typ = r.Type
			_ = c.conn.Send(pva.AppendMonitorRequest(nil, f, &pva.MonitorRequest{SID: c.sid, IOID: c.ioid, Subcmd: pva.SubcmdMonitorStart}))
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
