package config

import (
	"strings"
	"time"
)

// tCPRows adds the tcp.* settings, beside each other so a part's settings
// are read together.
func tCPRows() {
	add(intSpec("tcp.max_connections", "name-server client connections at most", 1, 10_000_000,
		func(c *Config) *int { return &c.TCP.MaxConnections }),
		"10000", live("TCP policy, next accepted connection", "tcp"),
		"Name-server client connections at most.")
	// A console host runs a few dozen PVA clients, each with one connection
	// per name server; a NAT gateway is exempted with rate_limit.exempt.
	add(intSpec("tcp.max_connections_per_source", "name-server connections from one client address at most; 0 = no bound (rate_limit.exempt sources are exempt)", 0, 10_000_000,
		func(c *Config) *int { return &c.TCP.MaxConnectionsPerSource }),
		"256", live("TCP policy, next accepted connection", "tcp"),
		"Connections from one client address at most, so one host cannot take them all; 0 = no bound. rate_limit.exempt sources (a NAT gateway) are exempt.")
	add(bytesSpec("tcp.send_queue_bytes", "bytes queued to one slow client before it is disconnected", 4<<10, 1<<30,
		func(c *Config) *int64 { return &c.TCP.SendQueueBytes }),
		"1MiB", live("TCP policy, connections accepted from then on", "tcp"),
		"Bytes queued to one slow client before it is disconnected.")
	add(intSpec("tcp.waiters_per_connection", "unanswered names remembered per connection for push answers; 0 = no bound", 0, 100_000_000,
		func(c *Config) *int { return &c.TCP.WaitersPerConnection }),
		"100000", live("resolver policy: raised now, lowered as waiters leave", "resolver"),
		"Unanswered names remembered per connection, answered as soon as learned.")
	// A waiter only speeds an answer up (the client's own retry finds the
	// name anyway), so these bound memory, not service: about 1 KiB per
	// waiter with its search-through entry.
	add(intSpec("tcp.waiters_per_source", "unanswered names remembered for push over all connections from one client address; 0 = no bound", 0, 100_000_000,
		func(c *Config) *int { return &c.TCP.WaitersPerSource }),
		"10000", live("resolver policy: raised now, lowered as waiters leave", "resolver"),
		"The same over all connections from one client address (about 1 KiB each); 0 = no bound.")
	add(intSpec("tcp.waiters_total", "unanswered names remembered for push over all connections; 0 = no bound", 0, 100_000_000,
		func(c *Config) *int { return &c.TCP.WaitersTotal }),
		"100000", live("resolver policy: raised now, lowered as waiters leave", "resolver"),
		"The same over all connections; 0 = no bound.")
	add(spec{key: "tcp.idle_timeout", ptr: field(func(c *Config) *time.Duration { return &c.TCP.IdleTimeout }), usage: "close a client silent this long; auto = 4/3 x pva.conn_tmo (PVXS tcpTimeout)",
		set: func(c *Config, _ *loadCtx, v raw) error {
			t := strings.TrimSpace(v.text)
			if strings.EqualFold(t, "auto") {
				c.TCP.IdleTimeout = 0
				return nil
			}
			d, err := parseDuration(t)
			if err != nil {
				return err
			}
			c.TCP.IdleTimeout = d
			return nil
		},
		get: func(c *Config) string { return c.TCP.IdleTimeout.String() },
		check: func(c *Config) string {
			if c.TCP.IdleTimeout < time.Second {
				return "must be at least 1s (or auto)"
			}
			return ""
		}},
		"auto", live("TCP policy, connections accepted from then on", "tcp"),
		"Close a client that sent nothing for this long; auto follows pva.conn_tmo (4/3 x, PVXS tcpTimeout). PVXS clients echo every 15 s.")
	add(durSpec("tcp.read_timeout", "time allowed for the handshake, and for one message from its first byte to its last segment (control messages do not restart it)", 100*time.Millisecond, 0,
		func(c *Config) *time.Duration { return &c.TCP.ReadTimeout }),
		"10s", live("TCP policy, connections accepted from then on", "tcp"),
		"Time allowed for the handshake, and for a message from its first byte to its last segment (slow-loris defence; control messages do not restart it).")
	add(bytesSpec("tcp.max_message_bytes", "largest PVA message accepted from a client", 16<<10, 64<<20,
		func(c *Config) *int64 { return &c.TCP.MaxMessageBytes }),
		"128KiB", live("TCP policy, connections accepted from then on", "tcp"),
		"Largest PVA message accepted from a client (searches are <= 1400 bytes).")
	// 1,000 clients each 256 KiB behind; 10,000 × (1 MiB queue + 256 KiB
	// message buffers) would be 12 GiB without it.
	add(bytesSpec("tcp.buffer_bytes_total", "bytes all client connections together may make pvans buffer beyond their base buffers (queued replies beyond 64 KiB each, large messages being received); a connection needing more is closed; 0 = no bound", 0, 1<<40,
		func(c *Config) *int64 { return &c.TCP.BufferBytesTotal }),
		"256MiB", live("TCP policy: the shared budget's bound, from the next byte charged", "tcp"),
		"Bytes all client connections together may make pvans buffer beyond their base buffers (replies queued beyond 64 KiB per connection, large messages being received); a connection needing more is closed. 0 = no bound.")
	// pvlist and pvxlist cache a handful of descriptors of a few hundred
	// bytes.
	add(intSpec("tcp.max_cached_types", "pvData types one client may have the server PV cache (0xFD definitions)", 1, 65536,
		func(c *Config) *int { return &c.TCP.MaxCachedTypes }),
		"64", restart("the server PV takes its type-cache bounds when it is built"),
		"pvData types one client may have the server PV cache (0xFD definitions in its RPC requests; pvlist uses a handful), their expanded size, and that size over all connections. Definitions beyond are refused.")
	add(bytesSpec("tcp.max_cached_type_bytes", "expanded size of the types one client may have cached", 1<<10, 1<<30,
		func(c *Config) *int64 { return &c.TCP.MaxCachedTypeBytes }),
		"64KiB", restart("the server PV takes its type-cache bounds when it is built"),
		"Expanded size of one client's cached types.")
	add(bytesSpec("tcp.max_cached_type_bytes_total", "expanded size of the types cached over all connections", 1<<10, 1<<34,
		func(c *Config) *int64 { return &c.TCP.MaxCachedTypeBytesTotal }),
		"16MiB", restart("the server PV takes its type-cache bounds when it is built"),
		"Expanded size of the cached types over all connections.")
}
