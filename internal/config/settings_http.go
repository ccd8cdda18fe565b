package config

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/prometheus/exporter-toolkit/web"
)

// httpRows adds the http.* settings, beside each other so a part's settings
// are read together.
func httpRows() {
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
}
