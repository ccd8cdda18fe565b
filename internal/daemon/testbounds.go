package daemon

import (
	"time"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/relay"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/udpsearch"
)

// Bounds are the values of former settings (issue 40) that in-process
// tests shorten or lift to make a scenario fast: production takes each
// from its constant beside its code. They reach the daemon only through
// Options.TestBounds, which config cannot set and cmd/pvans never does, so
// they are no setting in disguise.
type Bounds struct {
	ProbeBackoffMin time.Duration // probe.DefaultBackoffMin
	// ProbeEcho is the probes' ECHO period; 0: PVXS's client echo of
	// pva.conn_tmo (config.PVA.EchoInterval), as in production.
	ProbeEcho        time.Duration
	ReflectionRatio  float64       // udpsearch.DefaultReflectionRatio; 0: no cap
	ReflectionWindow time.Duration // udpsearch.DefaultReflectionWindow
	DiscoverInterval time.Duration // httpapi.DefaultDiscoverInterval
	RelayPerSecond   float64       // relay.DefaultPerSecond; 0: no bound
	WaitersPerSource int           // resolver.DefaultMaxWaitsPerSource; 0: no bound
}

// productionBounds are the constants.
func productionBounds() Bounds {
	return Bounds{
		ProbeBackoffMin:  probe.DefaultBackoffMin,
		ReflectionRatio:  udpsearch.DefaultReflectionRatio,
		ReflectionWindow: udpsearch.DefaultReflectionWindow,
		DiscoverInterval: httpapi.DefaultDiscoverInterval,
		RelayPerSecond:   relay.DefaultPerSecond,
		WaitersPerSource: resolver.DefaultMaxWaitsPerSource,
	}
}

// probeEcho is the probes' ECHO period under cfg.
func (b Bounds) probeEcho(cfg *config.Config) time.Duration {
	if b.ProbeEcho > 0 {
		return b.ProbeEcho
	}
	return cfg.PVA.EchoInterval()
}
