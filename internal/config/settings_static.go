package config

import (
	"net/netip"
	"strings"
)

// staticRows adds the static.* settings, beside each other so a part's settings
// are read together.
func staticRows() {
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
}
