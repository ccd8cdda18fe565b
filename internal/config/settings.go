package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/pvans-project/pvans/internal/addrmap"
	"github.com/pvans-project/pvans/internal/keychain"
)

// raw is one value as a source wrote it.
type raw struct {
	text  string
	items []string // list settings: YAML sequence items, or the text split on whitespace
	o     origin
}

type loadCtx struct {
	resolve Resolver
}

// spec is one setting: its names in every source, its default, how to
// parse, print and check it. The table below is the single list the file
// keys, flags, environment, defaults, provenance, validation and the
// reference doc all come from.
type spec struct {
	key   string   // file key, "section.name"
	flag  string   // flag name without dashes
	env   []string // environment variables, first set one wins (PVXS pickone)
	usage string
	// ptr is the Config field the setting is held in, as a pointer, for
	// Fill.
	ptr func(c *Config) any
	// def is the production default as a file would write it; Defaults
	// parses it with set, so it is the one place the value is written.
	def string
	// reload is what a reload does with a changed value (reload.go).
	reload reloadClass
	// doc is the comment above the key in configs/pvans.yaml, when it has
	// more to say than usage ("": usage). The example file is written from
	// the rows (TestProductionExample).
	doc    string
	isBool bool
	isList bool
	late   bool // parsed after the ports, which give list entries their default port
	set    func(c *Config, x *loadCtx, v raw) error
	get    func(c *Config) string
	check  func(c *Config) string // "" when fine, else why not
}

var (
	specs     []*spec
	specByKey = map[string]*spec{}
	specByFlg = map[string]*spec{}
	sections  = map[string]bool{}
)

// add appends one row: the setting s, its default def (see spec.def),
// its reload class r (restart or live) and the example file's comment doc
// (see spec.doc).
func add(s spec, def string, r reloadClass, doc string) {
	s.def, s.reload, s.doc = def, r, doc
	sec, name, _ := strings.Cut(s.key, ".")
	if s.flag == "" {
		f := s.key
		if sec == "pva" {
			f = name
		}
		s.flag = strings.NewReplacer(".", "-", "_", "-").Replace(f)
	}
	p := &s
	specs = append(specs, p)
	specByKey[s.key] = p
	specByFlg[s.flag] = p
	sections[sec] = true
}

func init() {
	// EPICS settings. Environment names and fallbacks follow PVXS
	// server::Config::fromEnv (and client::Config for the name servers).
	add(spec{key: "pva.interfaces", ptr: field(func(c *Config) *[]netip.Addr { return &c.PVA.Interfaces }), env: []string{"EPICS_PVAS_INTF_ADDR_LIST"}, isList: true,
		usage: "local interface addresses pvans serves: the TCP listener binds each; the UDP search port binds 0.0.0.0, answers only searches that reached one of these addresses and learns servers only from their interfaces (see \"UDP binding\"); ports are ignored; empty means 0.0.0.0",
		set: func(c *Config, x *loadCtx, v raw) error {
			l, groups, err := parseInterfaces(v.items, x.resolve)
			if err != nil {
				return err
			}
			if len(l) == 0 {
				l = []netip.Addr{netip.IPv4Unspecified()}
			}
			c.PVA.Interfaces, c.PVA.SearchGroups = l, groups
			return nil
		},
		get: func(c *Config) string {
			s := joinStrings(c.PVA.Interfaces)
			if len(c.PVA.SearchGroups) > 0 {
				s += " " + joinStrings(c.PVA.SearchGroups)
			}
			return s
		},
		check: func(c *Config) string {
			if len(c.PVA.Interfaces) == 0 {
				return "at least one interface is needed (0.0.0.0 for all)"
			}
			for _, a := range c.PVA.Interfaces {
				if a.IsMulticast() {
					return fmt.Sprintf("%s is a multicast group, not an interface address", a)
				}
			}
			for _, g := range c.PVA.SearchGroups {
				if !g.IsMulticast() {
					return fmt.Sprintf("%s is not a multicast group", g)
				}
			}
			return ""
		}},
		"0.0.0.0", restart("the listening sockets are bound at start"),
		"Local interfaces the UDP (search) and TCP (name-server) listeners bind. Servers are learned only from these interfaces' networks (beacons, discovery and search replies; see udp.learn_interfaces). Ports are ignored.")
	add(portSpec("pva.server_port", []string{"EPICS_PVAS_SERVER_PORT", "EPICS_PVA_SERVER_PORT"},
		"TCP port of the name-server listener and default port of name servers and static servers",
		func(c *Config) *uint16 { return &c.PVA.ServerPort }),
		"5075", restart("the TCP listener is bound at start"),
		"TCP port clients connect to as a name server (EPICS_PVA_NAME_SERVERS on the clients).")
	add(spec{key: "pva.tls_keychain", ptr: field(func(c *Config) *string { return &c.PVA.TLSKeychain }), env: []string{"EPICS_PVAS_TLS_KEYCHAIN", "EPICS_PVA_TLS_KEYCHAIN"},
		usage: "Secure PVAccess keychain, file[;password] (PKCS#12): serve searches over TLS on tls_port (clients name pvans pvas://host:port); empty: no TLS listener; re-read on reload",
		set:   func(c *Config, _ *loadCtx, v raw) error { c.PVA.TLSKeychain = strings.TrimSpace(v.text); return nil },
		get: func(c *Config) string {
			if p, pw, ok := strings.Cut(c.PVA.TLSKeychain, ";"); ok && pw != "" {
				return p + ";…" // never print the password
			}
			return c.PVA.TLSKeychain
		}},
		"", live("the TLS listener: the keychain is read again on every reload (a changed file too), next handshake; turning TLS on or off needs a restart", "keychain"),
		"Secure PVAccess: a PKCS#12 keychain, file[;password]. Set, pvans also serves searches over TLS on tls_port (clients name it pvas://host:port); re-read on reload (SIGHUP). Empty: no TLS listener.")
	add(portSpec("pva.tls_port", []string{"EPICS_PVAS_TLS_PORT", "EPICS_PVA_TLS_PORT"},
		"TCP port of the TLS listener (with tls_keychain)",
		func(c *Config) *uint16 { return &c.PVA.TLSPort }),
		"5076", restart("the TLS listener is bound at start"),
		"TCP port of the TLS listener.")
	add(spec{key: "pva.tls_options", ptr: field(func(c *Config) *string { return &c.PVA.TLSOptions }), env: []string{"EPICS_PVAS_TLS_OPTIONS", "EPICS_PVA_TLS_OPTIONS"},
		usage: "TLS options: client_cert=optional (default: a client certificate is verified when sent) or client_cert=require",
		set:   func(c *Config, _ *loadCtx, v raw) error { c.PVA.TLSOptions = strings.TrimSpace(v.text); return nil },
		get:   func(c *Config) string { return c.PVA.TLSOptions },
		check: func(c *Config) string {
			if _, err := keychain.ParseOptions(c.PVA.TLSOptions); err != nil {
				return err.Error()
			}
			return ""
		}},
		"", restart("the TLS listener takes its client-certificate rule at start"),
		"client_cert=optional (a client certificate is verified when sent) or client_cert=require.")
	add(portSpec("pva.broadcast_port", []string{"EPICS_PVAS_BROADCAST_PORT", "EPICS_PVA_BROADCAST_PORT"},
		"UDP port for searches and beacons, and default port of the address lists",
		func(c *Config) *uint16 { return &c.PVA.BroadcastPort }),
		"5076", restart("the UDP search socket is bound at start"),
		"UDP port of searches and beacons.")
	add(endpointListSpec("pva.addr_list", []string{"EPICS_PVA_ADDR_LIST"},
		"destinations of discovery pings and search-through searches (host[:port][,TTL][@iface], IPv6 as [addr]; default port broadcast_port); a host name stands for all its addresses, resolved again every dns.refresh",
		func(c *Config) uint16 { return c.PVA.BroadcastPort },
		func(c *Config) *[]Endpoint { return &c.PVA.AddrList }),
		"", live("UDP search destinations, next send; a discovery ping goes to them at once", "destinations", "dns"),
		"Where discovery pings and search-through searches are sent: host[:port], IPv6 as [addr]:port; default port broadcast_port.")
	add(boolSpec("pva.auto_addr_list", []string{"EPICS_PVA_AUTO_ADDR_LIST"}, true,
		"add every interface broadcast address to addr_list",
		func(c *Config) *bool { return &c.PVA.AutoAddrList }),
		"YES", live("UDP search destinations (interfaces read again)", "destinations"),
		"Also send to every interface's broadcast address.")
	add(addrListSpec("pva.ignore_addr_list", []string{"EPICS_PVAS_IGNORE_ADDR_LIST"},
		"UDP searches from these sources are dropped; no port or port 0 matches any port",
		nil, false,
		func(c *Config) *[]netip.AddrPort { return &c.PVA.IgnoreAddrList }, nil),
		"", live("UDP policy, next datagram", "udp"),
		"UDP searches from these sources are dropped; no port (or port 0) means any port.")
	add(endpointListSpec("pva.beacon_addr_list", []string{"EPICS_PVAS_BEACON_ADDR_LIST", "EPICS_PVA_ADDR_LIST"},
		"destinations of the daemon's own beacons (only with udp.send_beacons), same form as addr_list, default port broadcast_port",
		func(c *Config) uint16 { return c.PVA.BroadcastPort },
		func(c *Config) *[]Endpoint { return &c.PVA.BeaconAddrList }),
		"", live("beacon destinations, next beacon", "destinations"),
		"Destinations of the daemon's own beacons (only used with udp.send_beacons).")
	add(boolSpec("pva.auto_beacon_addr_list", []string{"EPICS_PVAS_AUTO_BEACON_ADDR_LIST", "EPICS_PVA_AUTO_ADDR_LIST"}, true,
		"add every interface broadcast address to beacon_addr_list",
		func(c *Config) *bool { return &c.PVA.AutoBeaconAddrList }),
		"YES", live("beacon destinations (interfaces read again)", "destinations"),
		"Also beacon to every interface's broadcast address.")
	add(addrListSpec("pva.name_servers", []string{"EPICS_PVA_NAME_SERVERS"},
		"upstream TCP name servers (host[:port], IPv6 as [addr]:port, default port server_port); a host name is resolved again every dns.refresh",
		func(c *Config) uint16 { return c.PVA.ServerPort }, true,
		func(c *Config) *[]netip.AddrPort { return &c.PVA.NameServers },
		func(c *Config) *[]Endpoint { return &c.PVA.NameServerEntries }),
		"", live("upstream pool: removed servers disconnected, new ones connected", "upstream", "dns"),
		"Upstream TCP name servers searched too (host[:port], default port server_port).")
	add(spec{key: "pva.conn_tmo", ptr: field(func(c *Config) *float64 { return &c.PVA.ConnTmo }), env: []string{"EPICS_PVA_CONN_TMO"},
		usage: "connection timeout in seconds; TCP idle timeout is 4/3 of it (<=0 or non-finite: 40 s; minimum 2 s)",
		set: func(c *Config, _ *loadCtx, v raw) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v.text), 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return errors.New("not a number of seconds")
			}
			c.PVA.ConnTmo = f
			return nil
		},
		get: func(c *Config) string { return strconv.FormatFloat(c.PVA.ConnTmo, 'g', -1, 64) }},
		"30", live("client idle timeout (auto) and upstream timers, for new connections", "upstream", "tcp"),
		"Connection timeout in seconds; the TCP idle timeout is 4/3 of it (40 s by default; <=0 or non-finite means 40 s; never below 2 s).")

	// Daemon settings.
	// Loopback by default: POST /v1/discover acts and /v1/names lists the
	// site's names, so exposing the API is the operator's choice
	// (docs/SECURITY.md, "The HTTP endpoint").
	add(spec{key: "http.listen", ptr: field(func(c *Config) *string { return &c.HTTP.Listen }), usage: "host:port of the HTTP API, status page and metrics; empty turns it off (loopback by default: see docs/SECURITY.md)",
		set: func(c *Config, _ *loadCtx, v raw) error { c.HTTP.Listen = strings.TrimSpace(v.text); return nil },
		get: func(c *Config) string { return c.HTTP.Listen },
		check: func(c *Config) string {
			if c.HTTP.Listen == "" {
				return ""
			}
			host, port, err := net.SplitHostPort(c.HTTP.Listen)
			if err != nil {
				return "must be host:port or :port"
			}
			if _, err := parsePortNumber(port, true); err != nil {
				return err.Error()
			}
			if host != "" && strings.Contains(host, ":") {
				if _, err := netip.ParseAddr(host); err != nil {
					return "host is not an IP address"
				}
			}
			return ""
		}},
		"127.0.0.1:9076", restart("the HTTP listener is bound at start"),
		"HTTP API, status page, metrics (/metrics) and health endpoints; empty turns them off. Loopback by default: the API lists the site's names and POST /v1/discover sends broadcasts. To let Prometheus scrape from another host, listen on \":9076\" with web_config_file (TLS, client certificates or basic auth), and restrict port 9076 to the monitoring hosts with the firewall (docs/SECURITY.md).")
	add(intSpec("http.max_connections", "HTTP connections open at most; extra ones are closed at accept", 1, 1_000_000,
		func(c *Config) *int { return &c.HTTP.MaxConnections }),
		"64", live("HTTP service, next accepted connection", "http"),
		"HTTP connections open at most; extra ones are closed at accept.")
	add(intSpec("http.max_connections_per_source", "HTTP connections open at most from one client address", 1, 1_000_000,
		func(c *Config) *int { return &c.HTTP.MaxConnectionsPerSource }),
		"16", live("HTTP service, next accepted connection", "http"),
		"HTTP connections open at most from one client address.")
	add(durSpec("http.discover_interval", "at most one POST /v1/discover round per interval; extra requests are answered 429", time.Second, 0,
		func(c *Config) *time.Duration { return &c.HTTP.DiscoverInterval }),
		"10s", live("HTTP service, next POST /v1/discover", "http"),
		"At most one POST /v1/discover round per interval; extra requests get 429.")
	// An operator used to a CA gateway's or a monitoring system's "down"
	// row looks for the server that went away; an hour covers a shift's
	// look at the page, and a server back at its endpoint leaves at once.
	add(durSpec("http.show_down_for", "how long a server lost (and listed over TCP before) stays shown as down on the status page, in /v1/servers, pvans list --servers and pvans_registry_servers_down; 0 shows none", 0, 0,
		func(c *Config) *time.Duration { return &c.HTTP.ShowDownFor }),
		"1h", live("status page and API, next request", "http"),
		"How long a server that was lost (after it was listed over TCP) stays shown as down: the status page's banner and rows, /v1/servers (\"down\": true), pvans list --servers and the gauge pvans_registry_servers_down. A server listed again at its endpoint leaves the list at once. 0 shows none.")
	add(spec{key: "http.web_config_file", ptr: field(func(c *Config) *string { return &c.HTTP.WebConfigFile }), flag: "web.config.file",
		usage: "exporter-toolkit web configuration file (the Prometheus exporters' --web.config.file): TLS, client certificates, basic auth; read again at every request and TLS handshake; empty serves plain HTTP without authentication (see docs/SECURITY.md)",
		set:   func(c *Config, _ *loadCtx, v raw) error { c.HTTP.WebConfigFile = strings.TrimSpace(v.text); return nil },
		get:   func(c *Config) string { return c.HTTP.WebConfigFile },
		check: func(c *Config) string {
			if err := web.Validate(c.HTTP.WebConfigFile); err != nil {
				return err.Error()
			}
			return ""
		}},
		"", restart("the HTTP listener takes the file's path, and whether it serves TLS, at start (the file's contents are read again at every request and TLS handshake)"),
		"Exporter-toolkit web configuration file (--web.config.file, as for node_exporter): TLS, client certificates, basic auth with bcrypt hashes. Example: configs/web-config.yml. Empty: plain HTTP, no authentication.")
	// DNS rebinding (docs/SECURITY.md): names are the operator's; an
	// address, localhost and the host's own names need no entry.
	add(spec{key: "http.allowed_hosts", ptr: field(func(c *Config) *[]string { return &c.HTTP.AllowedHosts }), isList: true,
		usage: "DNS names the HTTP API answers to as Host beside IP addresses, localhost and this host's name (.example.org: the domain and every name under it; *: any, no DNS-rebinding check)",
		set: func(c *Config, _ *loadCtx, v raw) error {
			c.HTTP.AllowedHosts = nil
			for _, it := range v.items {
				for _, n := range strings.Split(it, ",") {
					if n = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(n), ".")); n != "" {
						c.HTTP.AllowedHosts = append(c.HTTP.AllowedHosts, n)
					}
				}
			}
			return nil
		},
		get: func(c *Config) string { return strings.Join(c.HTTP.AllowedHosts, " ") },
		check: func(c *Config) string {
			for _, n := range c.HTTP.AllowedHosts {
				if n == "*" {
					continue
				}
				if strings.Trim(strings.TrimPrefix(n, "."), "abcdefghijklmnopqrstuvwxyz0123456789-.") != "" || strings.TrimPrefix(n, ".") == "" {
					return fmt.Sprintf("%q: want a host name, .domain or *", n)
				}
			}
			return ""
		}},
		"", live("HTTP service, next request", "http"),
		"DNS names the HTTP API, status page and JSON endpoints answer to as the request's Host, beside IP addresses, localhost and this host's own name (and http.listen's host): the check that stops DNS rebinding (docs/SECURITY.md). \".site.org\" admits the domain and every name under it; \"*\" turns the check off. /healthz, /readyz and /metrics answer any Host.")
	add(enumSpec("log.level", "least severe level logged", []string{"debug", "info", "warn", "error"},
		func(c *Config) *string { return &c.Log.Level }),
		"info", live("cmd/pvans: the logger", "log"),
		"debug, info, warn or error.")
	add(enumSpec("log.format", "auto (console on a terminal, json otherwise), console or json",
		[]string{"auto", "console", "json"}, func(c *Config) *string { return &c.Log.Format }),
		"auto", live("cmd/pvans: the logger", "log"),
		"auto (console on a terminal, json otherwise), console or json.")

	add(spec{key: "snapshot.path", ptr: field(func(c *Config) *string { return &c.Snapshot.Path }), usage: "registry snapshot file; empty disables saving and loading",
		set: func(c *Config, _ *loadCtx, v raw) error { c.Snapshot.Path = strings.TrimSpace(v.text); return nil },
		get: func(c *Config) string { return c.Snapshot.Path }},
		"/var/lib/pvans/registry.snapshot", restart("the snapshot is loaded at start; a new path would lose the loaded registry's file"),
		"Registry snapshot, so a restarted daemon answers at once. Empty disables.")
	add(durSpec("snapshot.interval", "time between snapshot saves", time.Second, 0,
		func(c *Config) *time.Duration { return &c.Snapshot.Interval }),
		"1m", live("next snapshot save", "snapshot"),
		"Time between saves.")
	add(durSpec("snapshot.unverified_window", "how long names loaded from a snapshot are answered before a probe must confirm their server",
		time.Second, 0, func(c *Config) *time.Duration { return &c.Snapshot.UnverifiedWindow }),
		"10m", live("registry: the expiry of unconfirmed snapshot servers is re-armed", "registry"),
		"Names loaded from a snapshot are answered this long before a probe must confirm their server; unconfirmed ones are then dropped.")

	add(intSpec("registry.max_servers", "servers tracked at most (also the beacon tracking limit)", 1, 10_000_000,
		func(c *Config) *int { return &c.Registry.MaxServers }),
		"20000", live("registry and beacon tracker: raised now, lowered at the next natural eviction; a relay's re-announce table at once", "registry", "beacon", "relay"),
		"Servers tracked at most; also the beacon tracking limit (PVXS: 20000) and the servers a relay keeps to re-announce.")
	add(intSpec("registry.max_names", "names held at most over all servers", 1, 1_000_000_000,
		func(c *Config) *int { return &c.Registry.MaxNames }),
		"5000000", live("registry: raised now, lowered at the next natural eviction", "registry"),
		"Names held at most over all servers.")
	add(boolSpec("registry.field_names", nil, false, `answer "rec.FIELD" with the server that claims "rec"`,
		func(c *Config) *bool { return &c.Registry.FieldNames }),
		"true", live("registry, next lookup", "registry"),
		"Answer \"rec.FIELD\" with the server claiming \"rec\" (QSRV serves field channels it never lists).")

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

	add(bytesSpec("udp.receive_buffer_bytes", "SO_RCVBUF of the UDP socket; 0 keeps the OS default", 0, 1<<30,
		func(c *Config) *int64 { return &c.UDP.ReceiveBufferBytes }),
		"4MiB", live("UDP sockets, at once (0 leaves the current buffer until a restart)", "udp_buffer"),
		"SO_RCVBUF of the search socket; reply and search bursts overrun small buffers. 0 keeps the OS default (capped by net.core.rmem_max).")
	add(boolSpec("udp.answer_searches", nil, false, "answer UDP searches with names from the registry",
		func(c *Config) *bool { return &c.UDP.AnswerSearches }),
		"true", live("UDP policy, next datagram", "udp"),
		"Answer UDP searches with names from the registry.")
	add(boolSpec("udp.answer_over_tcp", nil, false, "answer a client's UDP searches over its own TCP name-server connection when the two are paired (same search over both)",
		func(c *Config) *bool { return &c.UDP.AnswerOverTCP }),
		"true", live("UDP policy, next datagram", "udp"),
		"Answer a client's UDP searches over its own TCP name-server connection once the two are paired (it sent the same search over both), where no answer is lost; false answers them over UDP only (docs/operations.md, \"Big clients\").")
	add(intSpec("udp.pairing_fingerprints", "searches remembered, over all client hosts, to pair a client's UDP socket with its TCP name-server connection; beyond it none is remembered (counted)", 1, 10_000_000,
		func(c *Config) *int { return &c.UDP.PairingFingerprints }),
		"32768", restart("the pairing table is built with the UDP and TCP sides"),
		"Searches remembered (about 100 bytes each, 2 s each, at most 128 per client host and side) to pair a client's UDP socket with its own TCP name-server connection; beyond it none is remembered and pvans_twin_refused_total{reason=\"recent_full\"} counts them (docs/SECURITY.md, \"Answers over the client's own TCP connection\").")
	add(boolSpec("udp.send_beacons", nil, false, "announce the daemon with its own beacons",
		func(c *Config) *bool { return &c.UDP.SendBeacons }),
		"false", live("pvans's own beacons start (a beacon at once) or stop", "beacons", "destinations"),
		"Announce the daemon with its own beacons (to beacon_addr_list).")
	add(intSpec("udp.beacon_queue", "beacons and discovery answers waiting for the server tracker; beyond it they are dropped (counted)", 1, 10_000_000,
		func(c *Config) *int { return &c.UDP.BeaconQueue }),
		"4096", restart("the queue is allocated when the UDP side is built"),
		"Beacons and discovery answers waiting for the server tracker (a queue, so the search port never waits for the registry); beyond it they are dropped and counted (pvans_udp_drops_total{reason=\"beacon_queue\"}).")
	add(spec{key: "udp.learn_interfaces", ptr: field(func(c *Config) *[]netip.Addr { return &c.UDP.LearnInterfaces }), isList: true,
		usage: "local interface addresses whose networks servers are learned from (beacons, discovery replies and search replies; the arrival interface decides, see \"UDP binding\"), in place of pva.interfaces's; the automatic address list (auto_addr_list) follows them; all takes them from every interface; empty: pva.interfaces's",
		set: func(c *Config, x *loadCtx, v raw) error {
			var items []string
			all := false
			for _, it := range v.items {
				if strings.EqualFold(it, "all") {
					all = true
				} else {
					items = append(items, it)
				}
			}
			l, groups, err := parseInterfaces(items, x.resolve)
			if err != nil {
				return err
			}
			if len(groups) > 0 {
				return fmt.Errorf("%s is a multicast group, not an interface address", groups[0].Addr())
			}
			if all {
				l = []netip.Addr{netip.IPv4Unspecified()}
			}
			c.UDP.LearnInterfaces = l
			return nil
		},
		get: func(c *Config) string {
			if slices.ContainsFunc(c.UDP.LearnInterfaces, netip.Addr.IsUnspecified) {
				return "all"
			}
			return joinStrings(c.UDP.LearnInterfaces)
		}},
		"", live("UDP policy, next datagram; destinations, next discovery round", "udp", "destinations"),
		"The interfaces (by local address) whose networks servers are learned from, in place of pva.interfaces's, or [all]: a gateway host serves clients on one leg (pva.interfaces) and learns servers on the other. Discovery and search-through sent by auto_addr_list go only to these interfaces' broadcast addresses. Hints from elsewhere are counted when dropped: pvans_hints_dropped_total{reason=\"interface\"}.")
	add(floatSpec("udp.client_reply_names_per_second", "names answered over UDP to one client socket per second beyond its burst, later replies held and sent when due; 0 = no pacing", 0, 1e9,
		func(c *Config) *float64 { return &c.UDP.ClientReplyNamesPerSecond }),
		"40000", restart("the reply pacer is made when the UDP side is built"),
		"Names answered to one client socket a second beyond client_reply_name_burst, later replies held and sent when due, so a big client's start-up burst (thousands of replies at once) does not overflow its receive buffer; 0 turns pacing off.")
	add(intSpec("udp.client_reply_name_burst", "names answered over UDP to one client socket at once before replies are paced", 1, 1_000_000,
		func(c *Config) *int { return &c.UDP.ClientReplyNameBurst }),
		"4096", restart("the reply pacer is made when the UDP side is built"),
		"Names answered to one client socket at once before replies are paced.")
	add(bytesSpec("udp.reply_queue_bytes", "paced UDP replies held at most, over all clients; beyond it they are dropped (counted)", 1<<10, 1<<30,
		func(c *Config) *int64 { return &c.UDP.ReplyQueueBytes }),
		"4MiB", restart("the reply pacer is made when the UDP side is built"),
		"Paced replies held at most, over all clients; beyond it they are dropped (pvans_udp_drops_total{reason=\"reply_queue\"}).")

	add(intSpec("probe.concurrency", "servers listed at the same time", 1, 4096,
		func(c *Config) *int { return &c.Probe.Concurrency }),
		"16", live("prober, probes started from then on", "probe"),
		"Servers listed at the same time...")
	add(intSpec("probe.per_host_concurrency", "servers of one IP address listed at the same time (its share of probe.concurrency)", 1, 4096,
		func(c *Config) *int { return &c.Probe.PerHostConcurrency }),
		"4", live("prober, probes started from then on", "probe"),
		"...and of them, servers of one IP address (its share of the pool).")
	add(durSpec("probe.reprobe_interval", "time between listings of a watched server", time.Second, 0,
		func(c *Config) *time.Duration { return &c.Probe.ReprobeInterval }),
		"5m", live("prober, next schedule", "probe"),
		"Time between listings of a server that is being watched.")
	add(durSpec("probe.backoff_min", "first retry delay after a failed probe", 10*time.Millisecond, 0,
		func(c *Config) *time.Duration { return &c.Probe.BackoffMin }),
		"1s", live("prober, next schedule", "probe"),
		"Retry delay after a failed probe starts here and doubles...")
	add(spec{key: "probe.backoff_max", ptr: field(func(c *Config) *time.Duration { return &c.Probe.BackoffMax }), usage: "longest retry delay after failed probes",
		set: durSet(func(c *Config) *time.Duration { return &c.Probe.BackoffMax }),
		get: func(c *Config) string { return c.Probe.BackoffMax.String() },
		check: func(c *Config) string {
			if c.Probe.BackoffMax < c.Probe.BackoffMin {
				return fmt.Sprintf("must not be less than probe.backoff_min (%s)", c.Probe.BackoffMin)
			}
			return ""
		}},
		"5m", live("prober, next schedule", "probe"),
		"...up to this.")
	add(spec{key: "probe.echo_interval", ptr: field(func(c *Config) *time.Duration { return &c.Probe.EchoInterval }), usage: "ECHO period on probe connections; peers drop silent clients after their tcpTimeout (40 s)",
		set: durSet(func(c *Config) *time.Duration { return &c.Probe.EchoInterval }),
		get: func(c *Config) string { return c.Probe.EchoInterval.String() },
		check: func(c *Config) string {
			if d := c.Probe.EchoInterval; d < time.Second || d > 30*time.Second {
				return "must be between 1s and 30s (PVXS peers drop a client silent for 40s)"
			}
			return ""
		}},
		"15s", live("prober, watch connections opened from then on", "probe"),
		"ECHO period on probe connections (servers drop silent clients at 40 s).")
	add(durSpec("probe.timeout", "time allowed to connect to a server and list its names", 100*time.Millisecond, 0,
		func(c *Config) *time.Duration { return &c.Probe.Timeout }),
		"30s", live("prober, next attempt", "probe"),
		"Time allowed to connect to a server and list its names.")
	add(intSpec("probe.search_through_retries", "failed probes after which an endpoint known only from search replies is forgotten", 1, 1000,
		func(c *Config) *int { return &c.Probe.ThroughRetries }),
		"4", live("prober, next failed probe", "probe"),
		"Endpoints known only from search replies (anyone can name any endpoint in one) are forgotten after this many failed probes in a row...")
	add(intSpec("probe.search_through_max", "endpoints known only from search replies probed at most (and search-through answers being checked over TCP); beyond it new ones are dropped (counted)", 1, 10_000_000,
		func(c *Config) *int { return &c.Probe.ThroughMax }),
		"1024", live("prober, next search reply naming a new endpoint", "probe"),
		"...and at most this many are probed; replies naming more are dropped (pvans_probe_search_through_dropped_total).")
	add(durSpec("probe.first_timeout", "probe.timeout for the first attempt at a server never listed (at most probe.timeout; retries get probe.timeout)", 100*time.Millisecond, 0,
		func(c *Config) *time.Duration { return &c.Probe.FirstTimeout }),
		"5s", live("prober, next attempt", "probe"),
		"The timeout of the first attempt at a server never listed (retries get probe.timeout), so a server that holds the connection silent does not hold a probe slot for long.")

	add(durSpec("beacon.expiry", "a server not heard from for this long is lost (PVXS: 360s)", time.Second, 0,
		func(c *Config) *time.Duration { return &c.Beacon.Expiry }),
		"360s", live("beacon tracker, next expiry check; a relay's next re-announce", "beacon", "relay"),
		"A server not heard from for this long is lost (PVXS: 360 s); a relay re-announces only the servers it heard within it.")
	add(spec{key: "beacon.check_interval", ptr: field(func(c *Config) *time.Duration { return &c.Beacon.CheckInterval }), usage: "how often beacon expiry is checked",
		set: durSet(func(c *Config) *time.Duration { return &c.Beacon.CheckInterval }),
		get: func(c *Config) string { return c.Beacon.CheckInterval.String() },
		check: func(c *Config) string {
			if c.Beacon.CheckInterval < 100*time.Millisecond {
				return "must be at least 100ms"
			}
			if c.Beacon.CheckInterval > c.Beacon.Expiry {
				return fmt.Sprintf("must not exceed beacon.expiry (%s)", c.Beacon.Expiry)
			}
			return ""
		}},
		"10s", live("beacon tracker, after the next check", "beacon"),
		"How often expiry is checked.")

	add(addrListSpec("static.servers", nil, "servers always probed, without waiting for a beacon (host[:port], default port server_port); a host name stands for all its addresses, resolved again every dns.refresh",
		func(c *Config) uint16 { return c.PVA.ServerPort }, true,
		func(c *Config) *[]netip.AddrPort { return &c.Static.Servers },
		func(c *Config) *[]Endpoint { return &c.Static.ServerEntries }),
		"", live("prober: new ones probed at once, removed ones forgotten", "static", "dns"),
		"Servers always probed, without waiting for a beacon (host[:port], default port pva.server_port).")
	add(spec{key: "static.names_dir", ptr: field(func(c *Config) *string { return &c.Static.NamesDir }), usage: "directory of static name lists; empty means none",
		set: func(c *Config, _ *loadCtx, v raw) error { c.Static.NamesDir = strings.TrimSpace(v.text); return nil },
		get: func(c *Config) string { return c.Static.NamesDir }},
		"", live("static name files: old directory's servers lost, new one scanned at once", "names"),
		"Directory of static name lists; empty means none.")

	add(boolSpec("search.through", nil, false, "search names no probe could list on addr_list and name_servers, like a client",
		func(c *Config) *bool { return &c.Search.Through }),
		"true", live("resolver: waited names handed to (or taken from) the search ring", "search"),
		"Search names that no probe could list on addr_list and name_servers, with the spec's client ring (one search per distinct name however many clients wait, 30 s saturation), as a PVXS client would for them. Turn it off to answer only from beacons, probes and static lists.")
	s := boolSpec("search.discovery_at_start", nil, false, "send one discovery ping to addr_list at start",
		func(c *Config) *bool { return &c.Search.DiscoveryAtStart })
	s.flag = "discovery-at-start"
	add(s,
		"true", restart("it only means something at start"),
		"Send one discovery ping to addr_list at start, so servers are found before their next beacon (up to 180 s).")
	add(intSpec("search.through_max_names", "distinct names searched through at once; names wanted beyond are not searched through (counted); 0 = no bound. Also bounds the (server, name) claims remembered for asking unlistable servers, oldest forgotten first (10000 when 0)", 0, 100_000_000,
		func(c *Config) *int { return &c.Search.ThroughMaxNames }),
		"10000", live("search ring: new names; a lowered bound drops none being searched", "ring"),
		"Distinct names searched through at once; names wanted beyond are not searched through (counted). 0 = no bound.")
	// A PVXS client searching 10,000 names sends about 10 datagrams/s once
	// its ring saturates; 50/s leaves room for start-up bursts.
	add(floatSpec("search.through_datagrams_per_second", "search-through datagrams sent per second at most (each to every destination); 0 = no bound", 0, 1_000_000,
		func(c *Config) *float64 { return &c.Search.ThroughDatagramsPerSecond }),
		"50", live("search ring: next datagram, with a full burst", "ring"),
		"Search-through datagrams sent per second at most, each to every addr_list destination and name server. 0 = no bound.")
	add(intSpec("search.max_name_bytes", "names longer than this are not answered, waited for or searched through (pvAccessCPP refuses over 500); 0 = no bound", 0, 65535,
		func(c *Config) *int { return &c.Search.MaxNameBytes }),
		"500", live("resolver policy, next lookup; registry, next listing", "resolver", "registry"),
		"Names longer than this are not answered, waited for or searched through (pvAccessCPP refuses channel names over 500 bytes). 0 = no bound.")

	add(spec{key: "access.tcp_client_allow", ptr: field(func(c *Config) *[]netip.Prefix { return &c.Access.TCPClientAllow }), isList: true,
		usage: "TCP clients allowed (CIDR), and on the TLS listener x509:NAME, a client whose verified certificate's first subject CN (PVXS's x509 account) is NAME; empty allows all",
		set: func(c *Config, _ *loadCtx, v raw) error {
			var prefixes []string
			var certs []string
			for _, item := range v.items {
				for _, tok := range strings.Fields(item) {
					if name, ok := strings.CutPrefix(tok, "x509:"); ok {
						if name == "" {
							return errors.New("x509: needs a certificate name (subject CN)")
						}
						certs = append(certs, name)
						continue
					}
					prefixes = append(prefixes, tok)
				}
			}
			p, err := ParsePrefixList(prefixes)
			if err != nil {
				return err
			}
			c.Access.TCPClientAllow, c.Access.TCPClientAllowCerts = p, certs
			return nil
		},
		get: func(c *Config) string {
			s := joinStrings(c.Access.TCPClientAllow)
			for _, n := range c.Access.TCPClientAllowCerts {
				if s != "" {
					s += " "
				}
				s += "x509:" + n
			}
			return s
		},
		check: checkEach(func(c *Config) *[]netip.Prefix { return &c.Access.TCPClientAllow }, netip.Prefix.IsValid, "invalid prefix in list")},
		"", live("TCP policy: refused clients' open connections closed, next accept checked", "tcp"),
		"TCP clients allowed (CIDR; a bare address is itself); empty allows all.")
	add(prefixSpec("access.tcp_client_deny", "TCP clients refused (CIDR); wins over allow",
		func(c *Config) *[]netip.Prefix { return &c.Access.TCPClientDeny }),
		"", live("TCP policy: refused clients' open connections closed, next accept checked", "tcp"),
		"TCP clients refused; deny wins over allow.")
	add(prefixSpec("access.udp_client_allow", "UDP search sources answered (CIDR); empty allows all",
		func(c *Config) *[]netip.Prefix { return &c.Access.UDPClientAllow }),
		"", live("UDP policy, next datagram", "udp"),
		"UDP search sources answered; empty allows all.")
	add(prefixSpec("access.udp_client_deny", "UDP search sources ignored (CIDR); wins over allow",
		func(c *Config) *[]netip.Prefix { return &c.Access.UDPClientDeny }),
		"", live("UDP policy, next datagram", "udp"),
		"UDP search sources ignored; deny wins over allow.")
	add(patternSpec("access.name_allow", "names answered (globs with * and ?, or re:REGEXP); empty allows all",
		func(c *Config) *[]NamePattern { return &c.Access.NameAllow }),
		"", live("resolver policy, next lookup", "resolver"),
		"Names answered: globs (* and ?) or re:REGEXP (whole-name match); empty allows all.")
	add(patternSpec("access.name_deny", "names never answered; wins over allow",
		func(c *Config) *[]NamePattern { return &c.Access.NameDeny }),
		"", live("resolver policy, next lookup", "resolver"),
		"Names never answered; deny wins over allow.")
	add(prefixSpec("access.server_allow", "server endpoints probed and named in answers (CIDR); empty allows all",
		func(c *Config) *[]netip.Prefix { return &c.Access.ServerAllow }),
		"", live("servers no longer admitted dropped and no longer probed; next sighting checked", "udp", "denied", "static"),
		"Server endpoints probed and named in answers (CIDR); empty allows all. A beacon or search reply must also come from an allowed sender.")
	add(prefixSpec("access.trusted_relays", "senders (CIDR) whose beacons and search replies may name a server address other than their own (gateways, relays); empty: a datagram must come from the address it names; an entry that is one address is sent a discovery ping at start (not each round), so a relay re-announces what it heard",
		func(c *Config) *[]netip.Prefix { return &c.Access.TrustedRelays }),
		"", live("UDP policy, next datagram", "udp"),
		"Senders (CIDR) whose beacons and search replies may name a server address other than their own (gateways, relays). Anyone else must send from the address it names (or name \"any\", meaning its own).")

	add(spec{key: "map.rules", ptr: field(func(c *Config) *addrmap.Map { return &c.Map.Rules }), isList: true,
		usage: "endpoint named to clients instead of the learned one (NAT, containers): one rule per item, servers=CIDR|addr:port[,...] [clients=CIDR,...] [except_clients=CIDR,...] to=ADDR[:PORT] [ports=[ADDR:]REAL:PUBLISHED,...]; first match wins",
		set: func(c *Config, _ *loadCtx, v raw) error {
			m, err := addrmap.ParseMap(v.items)
			if err != nil {
				return err
			}
			c.Map.Rules = m
			return nil
		},
		get: func(c *Config) string { return joinStrings(c.Map.Rules) }},
		"", live("TCP and UDP policies and the API's ?client= view: next answer", "tcp", "udp"),
		"Endpoints named to clients instead of the learned ones, for servers behind NAT or in containers (docs/operations.md, \"NAT and containers\"). One rule per item; the first that matches a (server, client) applies:\n  - \"servers=172.17.0.0/16 except_clients=172.17.0.0/16 to=10.0.0.5 ports=5075:15075\"")

	add(floatSpec("rate_limit.udp_searches_per_second", "UDP search datagrams handled per source address per second; 0 = unlimited", 0, 1e9,
		func(c *Config) *float64 { return &c.RateLimit.UDPSearchesPerSecond }),
		"1000", live("UDP policy: a new limiter, every source with a full burst", "udp"),
		"UDP search datagrams handled per source address per second; 0 = no limit.")
	add(intSpec("rate_limit.udp_search_burst", "UDP search datagrams a source may send at once above its rate", 1, 1_000_000_000,
		func(c *Config) *int { return &c.RateLimit.UDPSearchBurst }),
		"10000", live("UDP policy: a new limiter, every source with a full burst", "udp"),
		"Datagrams a source may send at once above that rate (a PVXS client searches every new channel at once: 100,000 names are ~2,700 datagrams).")
	add(floatSpec("rate_limit.udp_names_per_second", "names in UDP searches handled per source address per second; 0 = unlimited", 0, 1e9,
		func(c *Config) *float64 { return &c.RateLimit.UDPNamesPerSecond }),
		"40000", live("UDP policy: a new name budget, every source with a full burst", "udp"),
		"Names in UDP searches handled per source address per second, however they are packed; 0 = no limit.")
	add(intSpec("rate_limit.udp_name_burst", "names in UDP searches a source may send at once above its rate (a big client searches all its channels at start)", 1, 1_000_000_000,
		func(c *Config) *int { return &c.RateLimit.UDPNameBurst }),
		"400000", live("UDP policy: a new name budget, every source with a full burst", "udp"),
		"Names a source may search at once above that rate.")
	add(floatSpec("rate_limit.tcp_messages_per_second", "TCP messages handled per source address per second; 0 = unlimited", 0, 1e9,
		func(c *Config) *float64 { return &c.RateLimit.TCPMessagesPerSecond }),
		"1000", live("TCP policy: a new limiter, every source with a full burst", "tcp"),
		"TCP messages handled per source address per second; 0 = no limit.")
	add(intSpec("rate_limit.tcp_message_burst", "TCP messages a source may send at once above its rate", 1, 1_000_000_000,
		func(c *Config) *int { return &c.RateLimit.TCPMessageBurst }),
		"2000", live("TCP policy: a new limiter, every source with a full burst", "tcp"),
		"Messages a source may send at once above that rate.")
	add(floatSpec("rate_limit.reflection_ratio", "UDP reply bytes to a source at most this multiple of its search bytes; 0 = off", 0, 1000,
		func(c *Config) *float64 { return &c.RateLimit.ReflectionRatio }),
		"4", live("UDP policy: a new reflection account", "udp"),
		"UDP reply bytes to a source at most this multiple of the search bytes it sent, so a spoofed search cannot be amplified; 0 turns the check off.")
	add(durSpec("rate_limit.reflection_window", "window over which reflection_ratio is measured", 100*time.Millisecond, 0,
		func(c *Config) *time.Duration { return &c.RateLimit.ReflectionWindow }),
		"10s", live("UDP policy: a new reflection account", "udp"),
		"Window over which reflection_ratio is measured.")
	// A host of 200 IOCs starting at once sends 200 first beacons; steady
	// state is one per IOC per 15 s (fast) or 180 s.
	add(floatSpec("rate_limit.beacons_per_second", "beacons and discovery replies taken per sender address per second; 0 = unlimited", 0, 1e9,
		func(c *Config) *float64 { return &c.RateLimit.BeaconsPerSecond }),
		"20", live("UDP policy: a new beacon limiter", "udp"),
		"Beacons and discovery replies taken per sender address per second; 0 = no limit.")
	add(intSpec("rate_limit.beacon_burst", "beacons and discovery replies a sender may send at once above its rate", 1, 1_000_000_000,
		func(c *Config) *int { return &c.RateLimit.BeaconBurst }),
		"200", live("UDP policy: a new beacon limiter", "udp"),
		"Beacons a sender may send at once above that rate (a host of 200 IOCs starting together).")
	add(prefixSpec("rate_limit.exempt", "source addresses (CIDR) exempt from every rate and reflection limit",
		func(c *Config) *[]netip.Prefix { return &c.RateLimit.Exempt }),
		"", live("TCP and UDP policies: new limiters", "tcp", "udp"),
		"Source addresses (CIDR) exempt from every rate and reflection limit, e.g. a trusted gateway that speaks for many clients.")

	// On by default: a server that sends no beacons (the Phoebus Java
	// server), or one across a router, that starts after pvans is found
	// within a minute rather than only when a client asks for one of its
	// names. A round costs one datagram per addr_list destination and one
	// reply per server there (about 70 B): 1,000 servers answer 70 kB a
	// minute. Under beacon.expiry (360 s) with room for a lost reply or
	// two, so a server heard only this way stays tracked.
	add(spec{key: "discovery.interval", ptr: field(func(c *Config) *time.Duration { return &c.Discovery.Interval }), usage: "time between discovery pings to every addr_list destination (servers there answer and are listed over TCP); 0: only at start, after a reload that changed the destinations and on POST /v1/discover",
		set: durSet(func(c *Config) *time.Duration { return &c.Discovery.Interval }),
		get: func(c *Config) string { return c.Discovery.Interval.String() },
		check: func(c *Config) string {
			if d := c.Discovery.Interval; d != 0 && d < time.Second {
				return "must be 0 (off) or at least 1s"
			}
			return ""
		}},
		"60s", live("periodic discovery: the next ping is due one new interval after the reload (0 stops them)", "discovery"),
		"Time between discovery pings to every pva.addr_list destination, so a server that sends no beacons (the Phoebus Java server) or starts where its beacons do not reach pvans (across a router) is found within one interval and listed (or watched) over TCP. Each round is one datagram per destination and one reply per server there. 0 = only at start, after a reload that changed addr_list, and on POST /v1/discover (as EPICS servers and clients behave). See docs/operations.md, \"Servers\" and \"Reaching IOCs on other networks\".")

	// Kubernetes restarts a pod under a new address; 30 s is what a client
	// waits before it searches again anyway.
	add(spec{key: "dns.refresh", ptr: field(func(c *Config) *time.Duration { return &c.DNS.Refresh }), usage: "time between lookups of the host names in pva.addr_list, pva.name_servers, static.servers and relay.to (all A and AAAA records); 0: resolved once, at load",
		set: durSet(func(c *Config) *time.Duration { return &c.DNS.Refresh }),
		get: func(c *Config) string { return c.DNS.Refresh.String() },
		check: func(c *Config) string {
			if d := c.DNS.Refresh; d != 0 && d < time.Second {
				return "must be 0 (off) or at least 1s"
			}
			return ""
		}},
		"30s", live("DNS following: a round at once, then every new interval (0: none after it)", "dns"),
		"Host names in pva.addr_list, pva.name_servers, static.servers and relay.to are resolved again this often, with all their A and AAAA records (a restarted Kubernetes pod has a new address). 0 = once, at load.")
	add(durSpec("dns.timeout", "time allowed for one lookup; a failed lookup keeps the last answer", 100*time.Millisecond, time.Minute,
		func(c *Config) *time.Duration { return &c.DNS.Timeout }),
		"5s", live("DNS following, next round", "dns"),
		"Time allowed for one lookup; a failed lookup keeps the last answer.")
	add(intSpec("dns.concurrency", "lookups running at once", 1, 64,
		func(c *Config) *int { return &c.DNS.Concurrency }),
		"4", live("DNS following, next round", "dns"),
		"Lookups running at once.")
	add(intSpec("dns.max_names", "host names followed at most; the others keep their address from load (counted)", 1, 100_000,
		func(c *Config) *int { return &c.DNS.MaxNames }),
		"256", live("DNS following, next round", "dns"),
		"Host names followed at most; the others keep their address from load.")
	add(intSpec("dns.max_addresses", "addresses one host name stands for at most; the rest of an answer is dropped (counted)", 1, 4096,
		func(c *Config) *int { return &c.DNS.MaxAddresses }),
		"64", live("DNS following, next round", "dns"),
		"Addresses one host name stands for at most.")

	add(relayToSpec(endpointListSpec("relay.to", nil,
		"central pvans instances every accepted beacon and discovery reply is relayed to, naming the server's address (host[:port], default port broadcast_port); the central side accepts them only from its access.trusted_relays; multicast and broadcast destinations only with relay.to_broadcast; a discovery ping from one of their addresses gets every server heard first hand within beacon.expiry sent to that one again; empty: no relaying",
		func(c *Config) uint16 { return c.PVA.BroadcastPort },
		func(c *Config) *[]Endpoint { return &c.Relay.To })),
		"", live("relay, next sighting (its host names resolved in the next DNS round)", "relay", "dns"),
		"Central pvans instances each accepted beacon and discovery reply is sent on to, naming the server's own address (host[:port], default port pva.broadcast_port). They must list this host in access.trusted_relays. A multicast or broadcast destination is refused unless relay.to_broadcast is set.")
	// Relays relaying to a group of relays relay to each other; a relay
	// passes on only what it heard first hand, and a broadcast destination
	// is more often a pasted pva.addr_list than a choice.
	add(boolSpec("relay.to_broadcast", nil, false, "relay.to may name multicast and broadcast destinations (otherwise such an entry is refused, and one a host name resolves to is skipped)",
		func(c *Config) *bool { return &c.Relay.ToBroadcast }),
		"false", live("relay, next sighting", "relay"),
		"Lets relay.to name multicast and broadcast destinations; without it such an entry is an error, and an address a relay.to host name resolves to that is one (or a broadcast of this host's networks) is skipped (logged).")
	// 1,000 IOCs beaconing every 15 s at start are 67/s; a relay never sends
	// the central side more than this.
	add(floatSpec("relay.max_per_second", "sightings relayed per second at most (each to every relay.to destination); beyond the burst they are dropped (counted); 0 = no bound", 0, 1e6,
		func(c *Config) *float64 { return &c.Relay.PerSecond }),
		"500", live("relay: a new bound with a full burst", "relay"),
		"Sightings relayed per second at most; beyond the burst they are dropped (pvans_relay_dropped_total). 0 = no bound.")
	add(intSpec("relay.burst", "sightings relayed at once above relay.max_per_second", 1, 1_000_000,
		func(c *Config) *int { return &c.Relay.Burst }),
		"2000", live("relay: a new bound with a full burst", "relay"),
		"Sightings relayed at once above max_per_second (1,000 IOCs starting).")
	add(spec{key: "relay.only", ptr: field(func(c *Config) *bool { return &c.Relay.Only }), usage: "the relay profile (pvans relay): no TCP name server, no answers to UDP searches; sightings are only relayed, never listed here",
		isBool: true, set: setTo(func(c *Config) *bool { return &c.Relay.Only }, fromText(ParseBool)),
		get: func(c *Config) string { return strconv.FormatBool(c.Relay.Only) },
		check: func(c *Config) string {
			if c.Relay.Only && len(c.Relay.To) == 0 {
				return "needs relay.to"
			}
			return ""
		}},
		"false", restart("the profile decides at start whether the TCP name server is opened"),
		"The relay profile (what `pvans relay` runs): no TCP name server, no answers to UDP searches; sightings are only relayed.")

	add(intSpec("insight.names", "unresolved names kept per summary (4 summaries: two windows of two periods); memory is allocated at start", 10, 1_000_000,
		func(c *Config) *int { return &c.Insight.Names }),
		"10000", restart("the insight summaries are allocated at start"),
		"Heavy-hitter summaries of search traffic (/v1/insight, pvans list --unresolved/--clients). Slots per summary; four summaries each (two windows of two periods), allocated at start. With k slots a count is off by at most (searches in the window)/k.")
	add(intSpec("insight.clients", "searching clients kept per summary (4 summaries); memory is allocated at start", 10, 1_000_000,
		func(c *Config) *int { return &c.Insight.Clients }),
		"10000", restart("the insight summaries are allocated at start"),
		"Searching clients kept per summary, the same way.")
	add(bytesSpec("insight.queue_bytes", "staging between the answer paths and the insight summaries; searches beyond it are not summarised (counted)", 32<<10, 1<<30,
		func(c *Config) *int64 { return &c.Insight.QueueBytes }),
		"4MiB", restart("the insight staging buffers are allocated at start"),
		"Staging between the answer paths and the summaries; beyond it searches are not summarised (pvans_insight_dropped_names_total).")
	// A distinct name costs both windows' name summaries 1–2 µs (cache
	// misses, measured in the daemon): 2000 bounds them to ~0.4 % of a
	// core, while a site's usual missing-name traffic (hundreds a second)
	// is counted exactly.
	add(intSpec("insight.digest_names_per_second", "unclaimed names a second the name summaries count in full; beyond it (a storm of distinct missing names) they count a weighted random sample, so their CPU stays bounded; 0 = no limit", 0, 1_000_000_000,
		func(c *Config) *int { return &c.Insight.DigestNamesPerSecond }),
		"2000", restart("insight takes its budget when it is built"),
		"Unclaimed names a second the name summaries count in full. Beyond it (a storm of distinct missing names) they count a weighted random sample, so the digest costs at most ~0.4 % of a core; the reports then give sample_rate < 1 (pvans_insight_sampled_out_names_total). 0 = no limit.")
	add(intSpec("insight.guid_changes_per_hour", "more GUID changes than this at one server endpoint within an hour is reported as an anomaly event", 1, 1_000_000,
		func(c *Config) *int { return &c.Insight.GUIDChangesPerHour }),
		"3", restart("insight takes its threshold when it is built"),
		"More GUID changes than this at one server endpoint within an hour is reported as an anomaly event.")
}

// field is a spec's ptr: the Config field p points to.
func field[T any](p func(*Config) *T) func(*Config) any {
	return func(c *Config) any { return p(c) }
}

// setTo is a spec's set for a value parse makes alone (no other setting
// involved): it stores the result through p, or refuses the value.
func setTo[T any](p func(*Config) *T, parse func(raw) (T, error)) func(*Config, *loadCtx, raw) error {
	return func(c *Config, _ *loadCtx, v raw) error {
		x, err := parse(v)
		if err != nil {
			return err
		}
		*p(c) = x
		return nil
	}
}

// fromText and fromItems hand a parser a value's text or its list items.
func fromText[T any](parse func(string) (T, error)) func(raw) (T, error) {
	return func(v raw) (T, error) { return parse(v.text) }
}

func fromItems[T any](parse func([]string) (T, error)) func(raw) (T, error) {
	return func(v raw) (T, error) { return parse(v.items) }
}

// joined is a list setting's get: its items as a source would write them.
func joined[T fmt.Stringer](p func(*Config) *[]T) func(*Config) string {
	return func(c *Config) string { return joinStrings(*p(c)) }
}

// checkEach is a list setting's check: reason when ok refuses an item.
func checkEach[T any](p func(*Config) *[]T, ok func(T) bool, reason string) func(*Config) string {
	return func(c *Config) string {
		for _, x := range *p(c) {
			if !ok(x) {
				return reason
			}
		}
		return ""
	}
}

func parsePort(s string) (uint16, error) { return parsePortNumber(strings.TrimSpace(s), false) }

func portSpec(key string, env []string, usage string, p func(*Config) *uint16) spec {
	return spec{key: key, ptr: field(p), env: env, usage: usage, set: setTo(p, fromText(parsePort)),
		get: func(c *Config) string { return strconv.Itoa(int(*p(c))) },
		check: func(c *Config) string {
			if *p(c) == 0 {
				return "port must be 1-65535"
			}
			return ""
		}}
}

// ParseBool parses an EPICS YES/NO value, case-insensitive, also accepting
// true/false and 1/0.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yes", "true", "1":
		return true, nil
	case "no", "false", "0":
		return false, nil
	}
	return false, errors.New("must be YES or NO (or true/false, 1/0)")
}

func boolSpec(key string, env []string, epics bool, usage string, p func(*Config) *bool) spec {
	return spec{key: key, ptr: field(p), env: env, usage: usage, isBool: true, set: setTo(p, fromText(ParseBool)),
		get: func(c *Config) string {
			if epics {
				if *p(c) {
					return "YES"
				}
				return "NO"
			}
			return strconv.FormatBool(*p(c))
		}}
}

func parseInt(s string) (int64, error) {
	t := strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	n, err := strconv.ParseInt(t, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, errors.New("number out of range")
	}
	if err != nil {
		return 0, errors.New("not an integer")
	}
	return n, nil
}

func rangeReason(n, lo, hi int64, unit string) string {
	if n < lo || n > hi {
		return fmt.Sprintf("must be between %d%s and %d%s", lo, unit, hi, unit)
	}
	return ""
}

func intSpec(key, usage string, lo, hi int, p func(*Config) *int) spec {
	toInt := func(s string) (int, error) {
		n, err := parseInt(s)
		return int(n), err
	}
	return spec{key: key, ptr: field(p), usage: usage, set: setTo(p, fromText(toInt)),
		get:   func(c *Config) string { return strconv.Itoa(*p(c)) },
		check: func(c *Config) string { return rangeReason(int64(*p(c)), int64(lo), int64(hi), "") }}
}

var byteUnits = []struct {
	suffix string
	mult   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

// parseBytes reads a byte count: an integer with an optional KiB, MiB or
// GiB suffix (case-insensitive).
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if len(t) >= len(u.suffix) && strings.EqualFold(t[len(t)-len(u.suffix):], u.suffix) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := parseInt(t)
	if err != nil {
		return 0, errors.New("not a byte count (integer with optional KiB, MiB or GiB)")
	}
	if n > math.MaxInt64/mult || n < math.MinInt64/mult {
		return 0, errors.New("number out of range")
	}
	return n * mult, nil
}

func formatBytes(n int64) string {
	for _, u := range byteUnits {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func bytesSpec(key, usage string, lo, hi int64, p func(*Config) *int64) spec {
	return spec{key: key, ptr: field(p), usage: usage, set: setTo(p, fromText(parseBytes)),
		get: func(c *Config) string { return formatBytes(*p(c)) },
		check: func(c *Config) string {
			if n := *p(c); n < lo || n > hi {
				return fmt.Sprintf("must be between %s and %s", formatBytes(lo), formatBytes(hi))
			}
			return ""
		}}
}

// parseDuration reads a Go duration ("90s", "5m") or a plain number of
// seconds, the EPICS habit.
func parseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(t, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > float64(math.MaxInt64/int64(time.Second)) {
			return 0, errors.New("duration out of range")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, errors.New(`not a duration (e.g. "90s", "5m" or a number of seconds)`)
	}
	return d, nil
}

func durSet(p func(*Config) *time.Duration) func(*Config, *loadCtx, raw) error {
	return setTo(p, fromText(parseDuration))
}

// durSpec: hi 0 means no upper bound.
func durSpec(key, usage string, lo, hi time.Duration, p func(*Config) *time.Duration) spec {
	return spec{key: key, ptr: field(p), usage: usage, set: durSet(p),
		get: func(c *Config) string { return p(c).String() },
		check: func(c *Config) string {
			d := *p(c)
			if d < lo {
				return fmt.Sprintf("must be at least %s", lo)
			}
			if hi > 0 && d > hi {
				return fmt.Sprintf("must be at most %s", hi)
			}
			return ""
		}}
}

func parseFinite(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("not a finite number")
	}
	return f, nil
}

func floatSpec(key, usage string, lo, hi float64, p func(*Config) *float64) spec {
	return spec{key: key, ptr: field(p), usage: usage, set: setTo(p, fromText(parseFinite)),
		get: func(c *Config) string { return strconv.FormatFloat(*p(c), 'g', -1, 64) },
		check: func(c *Config) string {
			if f := *p(c); !(f >= lo && f <= hi) {
				return fmt.Sprintf("must be between %g and %g", lo, hi)
			}
			return ""
		}}
}

func enumSpec(key, usage string, allowed []string, p func(*Config) *string) spec {
	return spec{key: key, ptr: field(p), usage: usage,
		set: func(c *Config, _ *loadCtx, v raw) error {
			*p(c) = strings.ToLower(strings.TrimSpace(v.text))
			return nil
		},
		get: func(c *Config) string { return *p(c) },
		check: func(c *Config) string {
			for _, a := range allowed {
				if *p(c) == a {
					return ""
				}
			}
			return "must be one of " + strings.Join(allowed, ", ")
		}}
}

// addrListSpec is a list of addresses and ports (the full address spec is
// parsed; TTLs and interfaces, which only multicast destinations use, are
// dropped). A nil defPort gives the ignore-list form (port 0 = any). With
// unicastOnly a multicast entry is refused (TCP cannot reach a group).
//
// entries, if not nil, receives the list as written too, host names kept
// (Endpoint.Host), for the daemon to resolve them again.
func addrListSpec(key string, env []string, usage string, defPort func(*Config) uint16, unicastOnly bool, p func(*Config) *[]netip.AddrPort, entries func(*Config) *[]Endpoint) spec {
	return spec{key: key, ptr: field(p), env: env, usage: usage, isList: true, late: true,
		set: func(c *Config, x *loadCtx, v raw) error {
			var port uint16
			if defPort != nil {
				port = defPort(c)
			}
			l, err := parseEndpoints(v.items, port, x.resolve)
			if err != nil {
				return err
			}
			if unicastOnly {
				for _, e := range l {
					if e.IsMulticast() {
						return fmt.Errorf("%s is a multicast group; TCP cannot reach a group", e)
					}
				}
			}
			*p(c) = AddrPorts(merged(l))
			if entries != nil {
				*entries(c) = l
			}
			return nil
		},
		get: joined(p),
		check: func(c *Config) string {
			for _, ap := range *p(c) {
				if !ap.Addr().IsValid() {
					return "invalid address in list"
				}
				if defPort != nil && ap.Port() == 0 {
					return fmt.Sprintf("%s: port must be 1-65535", ap)
				}
			}
			return ""
		}}
}

// endpointListSpec is a list of UDP destinations with their multicast TTL
// and interface (PVXS SockEndpoint).
func endpointListSpec(key string, env []string, usage string, defPort func(*Config) uint16, p func(*Config) *[]Endpoint) spec {
	return spec{key: key, ptr: field(p), env: env, usage: usage, isList: true, late: true,
		set: func(c *Config, x *loadCtx, v raw) error {
			l, err := parseEndpoints(v.items, defPort(c), x.resolve)
			if err != nil {
				return err
			}
			*p(c) = l
			return nil
		},
		// Entries kept apart only by their host names print once.
		get: func(c *Config) string { return joinStrings(merged(*p(c))) },
		check: func(c *Config) string {
			for _, e := range *p(c) {
				if !e.Addr().IsValid() || e.Addr().Zone() != "" {
					return "invalid address in list"
				}
				if e.Port() == 0 {
					return fmt.Sprintf("%s: port must be 1-65535", e)
				}
				if e.TTL < NoTTL || e.TTL > 255 {
					return fmt.Sprintf("%s: TTL must be 0-255", e)
				}
			}
			return ""
		}}
}

func prefixSpec(key, usage string, p func(*Config) *[]netip.Prefix) spec {
	return spec{key: key, ptr: field(p), usage: usage, isList: true, set: setTo(p, fromItems(ParsePrefixList)), get: joined(p),
		check: checkEach(p, netip.Prefix.IsValid, "invalid prefix in list")}
}

func patternSpec(key, usage string, p func(*Config) *[]NamePattern) spec {
	return spec{key: key, ptr: field(p), usage: usage, isList: true, set: setTo(p, fromItems(parseNamePatterns)), get: joined(p),
		check: checkEach(p, func(q NamePattern) bool { return q.text != "" }, "pattern not built with ParseNamePattern")}
}

func joinStrings[T fmt.Stringer](l []T) string {
	parts := make([]string, len(l))
	for i, x := range l {
		parts[i] = x.String()
	}
	return strings.Join(parts, " ")
}

// relayToSpec refuses multicast and limited broadcast destinations in
// relay.to unless relay.to_broadcast says they are meant. (A directed
// broadcast is known only from the host's networks: the relay skips one
// when it sends.)
func relayToSpec(sp spec) spec {
	each := sp.check
	sp.check = func(c *Config) string {
		if m := each(c); m != "" {
			return m
		}
		if c.Relay.ToBroadcast {
			return ""
		}
		for _, e := range c.Relay.To {
			if a := e.Addr().Unmap(); a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
				return fmt.Sprintf("%s is a multicast or broadcast destination: a relay sends to central pvans instances one by one (set relay.to_broadcast: true if it is meant)", e)
			}
		}
		return ""
	}
	return sp
}
