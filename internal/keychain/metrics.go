package keychain

import "github.com/pvans-project/pvans/internal/metrics"

// counters are the holder's counters, each declared once
// (metrics.Register).
type counters struct {
	reloadErrors metrics.Counter `metric:"pvans_tls_keychain_reload_errors_total" help:"Keychain re-reads (reload, SIGHUP) refused; the keychain in force stays."`
}

// RegisterMetrics exposes the keychain in force (docs/operations.md):
// when its certificate expires (0 without a keychain: h nil), and the
// re-reads that were refused.
func (h *Holder) RegisterMetrics(m *metrics.Metrics) {
	m.Gauge("tls", "certificate_expiry_timestamp_seconds",
		"When the certificate of pvans's Secure PVAccess keychain (pva.tls_keychain) expires, Unix seconds; 0 without a keychain.",
		nil, func() float64 {
			if h == nil {
				return 0
			}
			return float64(h.Current().NotAfter().Unix())
		})
	if h == nil {
		m.Register(&counters{}) // the series read 0
		return
	}
	m.Register(&h.counters)
}
