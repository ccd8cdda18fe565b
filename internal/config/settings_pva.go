package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/pvans-project/pvans/internal/keychain"
)

// pvaRows adds the pva.* settings, beside each other so a part's settings
// are read together.
func pvaRows() {
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
		"30", live("client idle timeout, upstream and probe echo timers, for new connections", "upstream", "tcp", "probe"),
		"Connection timeout in seconds; the TCP idle timeout is 4/3 of it (40 s by default; <=0 or non-finite means 40 s; never below 2 s), and pvans's own connections to servers and name servers send ECHO as a PVXS client does, every 3/8 of that (between 1 s and 15 s).")
}
