package keychain

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The holder's counter is declared once (metrics.go): a slip in its tag
// fails here; without a keychain the series is there and reads 0.
func TestMetricsRegister(t *testing.T) {
	var h *Holder
	metrics.CheckExported(t, h.RegisterMetrics, map[string]*metrics.Counter{`pvans_tls_keychain_reload_errors_total`: nil})
}
