package config

import (
	"github.com/pvans-project/pvans/internal/addrmap"
)

// mapRows adds the map.* settings, beside each other so a part's settings
// are read together.
func mapRows() {
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
}
