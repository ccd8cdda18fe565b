package config

// restartOnly is the one list of settings a reload cannot apply: the
// sockets they describe are opened once, at start. Every other setting is
// applied by a reload (SIGHUP, systemctl reload); the daemon logs each of
// these that changed as needing a restart, `pvans check-config` marks them,
// and the reference table in docs/configuration.md says so.
//
// To add a setting: leave it out of this list and have the daemon apply it
// (see internal/daemon/reload.go), or put it here when the part that uses
// it cannot change it while running.
var restartOnly = map[string]string{
	"pva.interfaces":                    "the listening sockets are bound at start",
	"pva.server_port":                   "the TCP listener is bound at start",
	"pva.broadcast_port":                "the UDP search socket is bound at start",
	"pva.tls_port":                      "the TLS listener is bound at start",
	"pva.tls_options":                   "the TLS listener takes its client-certificate rule at start",
	"http.listen":                       "the HTTP listener is bound at start",
	"http.web_config_file":              "the HTTP listener takes the file's path, and whether it serves TLS, at start (the file's contents are read again at every request and TLS handshake)",
	"snapshot.path":                     "the snapshot is loaded at start; a new path would lose the loaded registry's file",
	"search.discovery_at_start":         "it only means something at start",
	"udp.beacon_queue":                  "the queue is allocated when the UDP side is built",
	"udp.client_reply_names_per_second": "the reply pacer is made when the UDP side is built",
	"udp.client_reply_name_burst":       "the reply pacer is made when the UDP side is built",
	"udp.reply_queue_bytes":             "the reply pacer is made when the UDP side is built",
	"tcp.max_cached_types":              "the server PV takes its type-cache bounds when it is built",
	"tcp.max_cached_type_bytes":         "the server PV takes its type-cache bounds when it is built",
	"tcp.max_cached_type_bytes_total":   "the server PV takes its type-cache bounds when it is built",
	"insight.names":                     "the insight summaries are allocated at start",
	"insight.clients":                   "the insight summaries are allocated at start",
	"insight.queue_bytes":               "the insight staging buffers are allocated at start",
	"insight.guid_changes_per_hour":     "insight takes its threshold when it is built",
	"insight.digest_names_per_second":   "insight takes its budget when it is built",
	"relay.only":                        "the profile decides at start whether the TCP name server is opened",
}

// NeedsRestart reports whether a changed value of the setting key takes
// effect only at the next start, and why.
func NeedsRestart(key string) (bool, string) {
	why, ok := restartOnly[key]
	return ok, why
}
