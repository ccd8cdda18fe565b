package config

import (
	"fmt"
	"strings"
)

// A removed setting is one an operator never needed to turn (issue 40):
// an internal bound, now a constant beside the code it bounds, with the
// reason and the measurement there. A file or flag that still sets one is
// not refused: the daemon starts with the constant and says so, once, in
// a warning naming the key, the constant and its value, so an upgrade
// never stops a site (docs/upgrading.md).
type removedSetting struct {
	constant string // where the value now lives, "package.Name"
	value    string // the constant's value, as the setting was written
}

// removed lists every setting taken out of the table, by file key. The
// values are checked against the constants by
// TestRemovedSettingsNameTheirConstants (internal/daemon), which sees
// both.
var removed = map[string]removedSetting{
	"http.max_connections":            {"httpapi.DefaultMaxConns", "64"},
	"http.max_connections_per_source": {"httpapi.DefaultMaxConnsPerSource", "16"},
	"http.show_down_for":              {"httpapi.DefaultShowDownFor", "1h"},
	"http.discover_interval":          {"httpapi.DefaultDiscoverInterval", "10s"},

	"tcp.max_connections_per_source":  {"tcpsearch.DefaultMaxConnsPerSource", "256"},
	"tcp.send_queue_bytes":            {"tcpsearch.DefaultSendQueueBytes", "1MiB"},
	"tcp.read_timeout":                {"tcpsearch.DefaultReadTimeout", "10s"},
	"tcp.max_message_bytes":           {"tcpsearch.DefaultMaxMessageBytes", "128KiB"},
	"tcp.buffer_bytes_total":          {"tcpsearch.DefaultBufferBytesTotal", "256MiB"},
	"tcp.idle_timeout":                {"4/3 x pva.conn_tmo (PVXS tcpTimeout)", "40s at the default conn_tmo"},
	"tcp.waiters_per_connection":      {"resolver.DefaultMaxWaitsPerClient", "100000"},
	"tcp.waiters_per_source":          {"resolver.DefaultMaxWaitsPerSource", "10000"},
	"tcp.max_cached_types":            {"serverpv.DefaultTypesPerConn", "64"},
	"tcp.max_cached_type_bytes":       {"serverpv.DefaultTypeBytesPerConn", "64KiB"},
	"tcp.max_cached_type_bytes_total": {"serverpv.DefaultTypeBytesTotal", "16MiB"},

	"udp.pairing_fingerprints":    {"twin.DefaultFingerprints", "32768"},
	"udp.beacon_queue":            {"udpsearch.DefaultBeaconQueue", "4096"},
	"udp.client_reply_name_burst": {"udpsearch.DefaultReplyBurst", "4096"},
	"udp.reply_queue_bytes":       {"udpsearch.DefaultReplyQueueBytes", "4MiB"},

	"probe.per_host_concurrency":   {"probe.DefaultPerHostConcurrency", "4"},
	"probe.backoff_max":            {"probe.DefaultBackoffMax", "5m"},
	"probe.search_through_retries": {"probe.DefaultThroughRetries", "4"},
	"probe.search_through_max":     {"probe.DefaultMaxThrough", "1024"},
	"probe.first_timeout":          {"probe.DefaultFirstTimeout", "5s"},
	"probe.concurrency":            {"probe.DefaultConcurrency", "16"},
	"probe.backoff_min":            {"probe.DefaultBackoffMin", "1s"},
	"probe.timeout":                {"probe.DefaultTimeout", "30s"},
	"probe.reprobe_interval":       {"probe.DefaultReprobeInterval", "5m"},
	"probe.echo_interval":          {"3/8 x 4/3 x pva.conn_tmo, 1s to 15s (PVXS client echo)", "15s at the default conn_tmo"},

	"rate_limit.reflection_ratio":  {"udpsearch.DefaultReflectionRatio", "4"},
	"rate_limit.reflection_window": {"udpsearch.DefaultReflectionWindow", "10s"},

	"registry.field_names": {"registry.FieldNames", "true"},
	"relay.max_per_second": {"relay.DefaultPerSecond", "500"},
	"insight.clients":      {"insight.DefaultClients", "10000"},

	"beacon.check_interval": {"beacon.DefaultCheckInterval", "10s (a quarter of beacon.expiry when shorter)"},

	"search.through_max_names":            {"searchring.DefaultMaxChannels", "10000"},
	"search.through_datagrams_per_second": {"searchring.DefaultDatagramsPerSecond", "50"},
	"search.max_name_bytes":               {"registry.MaxNameBytes", "500"},

	"rate_limit.udp_search_burst":  {"udpsearch.BurstSeconds", "10 s of rate_limit.udp_searches_per_second (10000)"},
	"rate_limit.udp_name_burst":    {"udpsearch.BurstSeconds", "10 s of rate_limit.udp_names_per_second (400000)"},
	"rate_limit.beacon_burst":      {"udpsearch.BurstSeconds", "10 s of rate_limit.beacons_per_second (200)"},
	"rate_limit.tcp_message_burst": {"tcpsearch.BurstSeconds", "2 s of rate_limit.tcp_messages_per_second (2000)"},
	"relay.burst":                  {"relay.BurstSeconds", "4 s of relay.max_per_second (2000)"},

	"dns.timeout":       {"dnswatch.DefaultTimeout", "5s"},
	"dns.concurrency":   {"dnswatch.DefaultConcurrency", "4"},
	"dns.max_names":     {"dnswatch.DefaultMaxNames", "256"},
	"dns.max_addresses": {"dnswatch.DefaultMaxAddresses", "64"},

	"insight.queue_bytes":             {"insight.DefaultQueueBytes", "4MiB"},
	"insight.digest_names_per_second": {"insight.DefaultDigestNamesPerSecond", "2000"},
	"insight.guid_changes_per_hour":   {"insight.DefaultGUIDChangesPerHour", "3"},
}

// removedByFlag is removed by the flag each key had (the same derivation
// as add's), so an old command line still parses.
var removedByFlag = func() map[string]string {
	m := make(map[string]string, len(removed))
	for k := range removed {
		m[flagName(k)] = k
	}
	return m
}()

// removedWarning is the warning for a removed setting set at where
// ("file F:LINE", "flag --NAME") to text.
func removedWarning(where, key, text string) string {
	r := removed[key]
	return fmt.Sprintf("%s: %s is no longer a setting and is ignored (value %q): pvans now uses %s = %s (docs/upgrading.md)",
		where, key, text, r.constant, r.value)
}

// Removed lists the removed settings' keys with the constant each became
// and its value as text, for the daemon's test that pairs them with the
// constants.
func Removed() map[string][2]string {
	out := make(map[string][2]string, len(removed))
	for k, r := range removed {
		out[k] = [2]string{r.constant, r.value}
	}
	return out
}

// RemovedFlag reports whether name is the flag of a removed setting:
// registered so an old command line parses, but not documented (the man
// page and completion skip it).
func RemovedFlag(name string) bool {
	_, ok := removedByFlag[name]
	return ok
}

// Warnings are what Load accepted but ignored (a removed setting), each a
// sentence naming the source, the key and the constant in force. The
// daemon logs them at start and on every reload; check-config prints
// them.
func (c *Config) Warnings() []string { return c.warnings }

// flagName is the flag a key gets: dots and underscores become dashes, and
// the pva section's keys lose their section (PVXS's variable names).
func flagName(key string) string {
	sec, name, _ := strings.Cut(key, ".")
	f := key
	if sec == "pva" {
		f = name
	}
	return strings.NewReplacer(".", "-", "_", "-").Replace(f)
}
