package daemon

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/dnswatch"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/insight"
	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/relay"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/searchring"
	"github.com/pvans-project/pvans/internal/serverpv"
	"github.com/pvans-project/pvans/internal/tcpsearch"
	"github.com/pvans-project/pvans/internal/twin"
	"github.com/pvans-project/pvans/internal/udpsearch"
)

// The warning for a removed setting (config, removed.go) names the
// constant now in force and its value; config cannot see the parts, so
// this test, which sees both, holds the two together: a constant changed
// beside its code without the warning fails here.
func TestRemovedSettingsNameTheirConstants(t *testing.T) {
	num := func(n int) string { return fmt.Sprint(n) }
	size := func(n int) string {
		switch {
		case n%(1<<20) == 0:
			return fmt.Sprintf("%dMiB", n>>20)
		case n%(1<<10) == 0:
			return fmt.Sprintf("%dKiB", n>>10)
		}
		return num(n)
	}
	dur := func(d time.Duration) string {
		s := d.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	}
	burst := func(sec int) string { return fmt.Sprintf("%d s of", sec) }
	// The constant's name, as the warning gives it, and the text its value
	// begins with.
	values := map[string]string{
		"httpapi.DefaultMaxConns":                                num(httpapi.DefaultMaxConns),
		"httpapi.DefaultMaxConnsPerSource":                       num(httpapi.DefaultMaxConnsPerSource),
		"httpapi.DefaultShowDownFor":                             dur(httpapi.DefaultShowDownFor),
		"tcpsearch.DefaultMaxConnsPerSource":                     num(tcpsearch.DefaultMaxConnsPerSource),
		"tcpsearch.DefaultSendQueueBytes":                        size(tcpsearch.DefaultSendQueueBytes),
		"tcpsearch.DefaultReadTimeout":                           dur(tcpsearch.DefaultReadTimeout),
		"tcpsearch.DefaultMaxMessageBytes":                       size(tcpsearch.DefaultMaxMessageBytes),
		"tcpsearch.DefaultBufferBytesTotal":                      size(tcpsearch.DefaultBufferBytesTotal),
		"tcpsearch.BurstSeconds":                                 burst(tcpsearch.BurstSeconds),
		"4/3 x pva.conn_tmo (PVXS tcpTimeout)":                   dur(pvaconn.DefaultIdleTimeout),
		"resolver.DefaultMaxWaitsPerClient":                      num(resolver.DefaultMaxWaitsPerClient),
		"serverpv.DefaultTypesPerConn":                           num(serverpv.DefaultTypesPerConn),
		"serverpv.DefaultTypeBytesPerConn":                       size(serverpv.DefaultTypeBytesPerConn),
		"serverpv.DefaultTypeBytesTotal":                         size(serverpv.DefaultTypeBytesTotal),
		"twin.DefaultFingerprints":                               num(twin.DefaultFingerprints),
		"udpsearch.DefaultBeaconQueue":                           num(udpsearch.DefaultBeaconQueue),
		"udpsearch.DefaultReplyBurst":                            num(udpsearch.DefaultReplyBurst),
		"udpsearch.DefaultReplyQueueBytes":                       size(udpsearch.DefaultReplyQueueBytes),
		"udpsearch.BurstSeconds":                                 burst(udpsearch.BurstSeconds),
		"probe.DefaultPerHostConcurrency":                        num(probe.DefaultPerHostConcurrency),
		"probe.DefaultBackoffMax":                                dur(probe.DefaultBackoffMax),
		"probe.DefaultThroughRetries":                            num(probe.DefaultThroughRetries),
		"probe.DefaultMaxThrough":                                num(probe.DefaultMaxThrough),
		"probe.DefaultFirstTimeout":                              dur(probe.DefaultFirstTimeout),
		"beacon.DefaultCheckInterval":                            dur(beacon.DefaultCheckInterval),
		"searchring.DefaultMaxChannels":                          num(searchring.DefaultMaxChannels),
		"searchring.DefaultDatagramsPerSecond":                   num(searchring.DefaultDatagramsPerSecond),
		"registry.MaxNameBytes":                                  num(registry.MaxNameBytes),
		"relay.BurstSeconds":                                     burst(relay.BurstSeconds),
		"dnswatch.DefaultTimeout":                                dur(dnswatch.DefaultTimeout),
		"dnswatch.DefaultConcurrency":                            num(dnswatch.DefaultConcurrency),
		"dnswatch.DefaultMaxNames":                               num(dnswatch.DefaultMaxNames),
		"dnswatch.DefaultMaxAddresses":                           num(dnswatch.DefaultMaxAddresses),
		"insight.DefaultQueueBytes":                              size(insight.DefaultQueueBytes),
		"insight.DefaultDigestNamesPerSecond":                    num(insight.DefaultDigestNamesPerSecond),
		"insight.DefaultGUIDChangesPerHour":                      num(insight.DefaultGUIDChangesPerHour),
		"insight.DefaultClients":                                 num(insight.DefaultClients),
		"httpapi.DefaultDiscoverInterval":                        dur(httpapi.DefaultDiscoverInterval),
		"resolver.DefaultMaxWaitsPerSource":                      num(resolver.DefaultMaxWaitsPerSource),
		"probe.DefaultConcurrency":                               num(probe.DefaultConcurrency),
		"probe.DefaultBackoffMin":                                dur(probe.DefaultBackoffMin),
		"probe.DefaultTimeout":                                   dur(probe.DefaultTimeout),
		"probe.DefaultReprobeInterval":                           dur(probe.DefaultReprobeInterval),
		"udpsearch.DefaultReflectionRatio":                       num(udpsearch.DefaultReflectionRatio),
		"udpsearch.DefaultReflectionWindow":                      dur(udpsearch.DefaultReflectionWindow),
		"registry.FieldNames":                                    fmt.Sprint(registry.FieldNames),
		"relay.DefaultPerSecond":                                 num(relay.DefaultPerSecond),
		"3/8 x 4/3 x pva.conn_tmo, 1s to 15s (PVXS client echo)": dur(config.Defaults().PVA.EchoInterval()),
	}
	seen := map[string]bool{}
	for key, r := range config.Removed() {
		name, text := r[0], r[1]
		want, ok := values[name]
		if !ok {
			t.Errorf("%s names %q, which this test does not know", key, name)
			continue
		}
		seen[name] = true
		if !strings.HasPrefix(text, want) {
			t.Errorf("%s: the warning says %s = %q, but the constant is %s", key, name, text, want)
		}
	}
	for name := range values {
		if !seen[name] {
			t.Errorf("%s: no removed setting names it", name)
		}
	}
}
