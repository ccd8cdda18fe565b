package searchring

import "net/netip"

// Transport carries the datagrams the ring builds. Its methods are called
// from the ring's timer goroutine without the ring's state lock held, one
// tick at a time, so an implementation may call back into the Ring (Poke
// on a name-server reconnect, OnReply) from any goroutine.
type Transport interface {
	// SendUDP sends one CMD_SEARCH datagram to every configured search
	// destination, setting the Unicast flag per destination as PVXS does
	// (docs/protocol.md, "The Unicast flag"), and tells sent each
	// destination's outcome. The slice is only valid during the call: send
	// or copy it (it may be edited in place).
	SendUDP(datagram []byte, sent func(to netip.AddrPort, err error))
	// Upstreams lists the TCP name-server connections, ready or not. It is
	// asked once per tick.
	Upstreams() []Upstream
}

// Upstream is one TCP name-server connection (EPICS_PVA_NAME_SERVERS).
type Upstream interface {
	// Addr is the name server's configured endpoint (it names the
	// per-server counters).
	Addr() netip.AddrPort
	// Ready reports that CONNECTION_VALIDATED has been seen.
	Ready() bool
	// Backlog is the number of bytes queued for transmission and not yet
	// written to the socket.
	Backlog() int
	// Send appends one CMD_SEARCH message (Unicast flag set, reply port 0)
	// to the connection's transmit queue. The slice is only valid during
	// the call: queue a copy.
	Send(msg []byte)
}
