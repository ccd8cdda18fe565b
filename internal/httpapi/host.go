package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// DNS rebinding: a web page from attacker.example, opened in a browser on
// the pvans host (or anywhere the port is forwarded), re-points its own
// name at 127.0.0.1 and then reads pvans's answers as same-origin ones:
// the whole inventory, and a discovery round on demand. The browser still
// sends the attacker's name as Host, so every endpoint that reveals or
// changes state answers only requests whose Host is one pvans is known
// by:
//
//   - an IP address (a page whose origin is an address was served by that
//     address; no name was re-pointed);
//   - localhost and names under .localhost (browsers resolve them to
//     loopback themselves, RFC 6761);
//   - the machine's host name and http.listen's host, when a name
//     (Options.HostNames);
//   - the names in http.allowed_hosts: exact, or ".site.org" for the
//     domain and every name under it; "*" turns the check off.
//
// A request with no Host (HTTP/1.0) is not a browser's and passes. The
// exempt paths reveal nothing of the site and are what probes and
// Prometheus reach by whatever name their configuration holds.
var hostExempt = []string{"/healthz", "/readyz", "/metrics"}

// hostAllowed reports whether a request naming host (r.Host, with or
// without a port) may be answered.
func hostAllowed(host string, own, allowed []string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimPrefix(strings.TrimSuffix(host, "]"), "[")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if slices.Contains(own, host) {
		return true
	}
	for _, a := range allowed {
		switch {
		case a == "*", a == host:
			return true
		case strings.HasPrefix(a, ".") && (host == a[1:] || strings.HasSuffix(host, a)):
			return true
		}
	}
	return false
}

// NormalizeHostNames lowercases names and drops trailing dots, as
// hostAllowed compares them (Handler and Limits do it to theirs).
func NormalizeHostNames(names []string) []string {
	var out []string
	for _, n := range names {
		if n = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(n), ".")); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// checkHost answers 421 for a request whose Host is not one pvans is
// known by, and reports whether it did.
func (a *api) checkHost(w http.ResponseWriter, r *http.Request) bool {
	if slices.Contains(hostExempt, r.URL.Path) ||
		hostAllowed(r.Host, a.o.HostNames, a.o.lim.Load().AllowedHosts) {
		return false
	}
	a.o.cnt.hostRefused.Add(1)
	a.ll.Hit("http_host", "request for a host name pvans is not known by refused (DNS rebinding?); add the name to http.allowed_hosts if it is yours",
		zap.String("host", r.Host), zap.String("client", r.RemoteAddr))
	writeErr(w, http.StatusMisdirectedRequest, "Host "+strconv.Quote(r.Host)+
		" is not a name this pvans answers to: use its address, localhost, or a name in http.allowed_hosts (docs/SECURITY.md)")
	return true
}
