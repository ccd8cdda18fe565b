package tcpsearch

import "time"

// The bounds the daemon gives every Policy (issue 40: constants, not
// settings; docs/SECURITY.md, "Bounds").
const (
	// DefaultMaxConnsPerSource: a console host runs a few dozen PVA
	// clients, each with one connection per name server; a NAT gateway is
	// exempted with rate_limit.exempt.
	DefaultMaxConnsPerSource = 256
	// BurstSeconds: a source may send this many seconds of
	// rate_limit.tcp_messages_per_second at once (2,000 at the default).
	BurstSeconds = 2
	// DefaultBufferBytesTotal: 1,000 clients each 256 KiB behind; 10,000 ×
	// (1 MiB queue + 256 KiB message buffers) would be 12 GiB without it.
	DefaultBufferBytesTotal = 256 << 20
	// DefaultSendQueueBytes is queued to one slow client before it is
	// disconnected.
	DefaultSendQueueBytes = 1 << 20
	// DefaultMaxMessageBytes is the largest message a client may send:
	// searches are at most 1,400 bytes.
	DefaultMaxMessageBytes = 128 << 10
	// DefaultReadTimeout bounds the handshake, and one message from its
	// first byte to its last segment (control messages do not restart it):
	// the slow-loris defence (test/hostile row 7).
	DefaultReadTimeout = 10 * time.Second
)
