package config

import (
	"errors"
	"net/netip"
	"strings"
)

// accessRows adds the access.* settings, beside each other so a part's settings
// are read together.
func accessRows() {
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
}
