// Package metrics exposes the daemon's counters to Prometheus. Each part
// declares its counters once, as Counter fields of one struct whose tags
// give the metric name, labels and help (Register); counting is a plain
// atomic add, so the hot paths never touch a Prometheus object, and this
// package reads the counts at scrape time. Gauges are read from funcs.
// Names follow Prometheus conventions: pvans_<subsystem>_<name>_<unit>,
// _total for counters.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pvans-project/pvans/internal/buildinfo"
)

// Namespace prefixes every metric.
const Namespace = "pvans"

// Metrics is one Prometheus registry with helpers for func-backed metrics.
type Metrics struct {
	Reg *prometheus.Registry
}

// New returns a registry holding Go runtime, process and build-info
// collectors. pvans_build_info's labels are those `pvans version` prints:
// version (as given), commit, build_date and goversion (from buildinfo).
func New(version string) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	b := buildinfo.Read()
	bi := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "build_info",
		Help: "Build information; the value is always 1.",
		ConstLabels: prometheus.Labels{"version": version, "commit": b.Commit, "build_date": b.Date,
			"goversion": b.GoVersion}})
	bi.Set(1)
	reg.MustRegister(bi)
	return &Metrics{Reg: reg}
}

// Counter registers a counter read from fn at scrape time. labels may be nil.
func (m *Metrics) Counter(subsystem, name, help string, labels prometheus.Labels, fn func() float64) {
	m.Reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Subsystem: subsystem,
		Name: name, Help: help, ConstLabels: labels}, fn))
}

// Gauge registers a gauge read from fn at scrape time. labels may be nil.
func (m *Metrics) Gauge(subsystem, name, help string, labels prometheus.Labels, fn func() float64) {
	m.Reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: subsystem,
		Name: name, Help: help, ConstLabels: labels}, fn))
}

// Histogram registers and returns a histogram vector.
func (m *Metrics) Histogram(subsystem, name, help string, buckets []float64, labelNames ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: subsystem,
		Name: name, Help: help, Buckets: buckets}, labelNames)
	m.Reg.MustRegister(h)
	return h
}

// CounterVec registers and returns a counter vector for events the daemon
// counts itself (not read from a part's Stats).
func (m *Metrics) CounterVec(subsystem, name, help string, labelNames ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: subsystem,
		Name: name, Help: help}, labelNames)
	m.Reg.MustRegister(c)
	return c
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Reg, promhttp.HandlerOpts{Registry: m.Reg})
}

// Counters registers one counter family whose series differ by one label:
// fns maps each label value to the atomic counter it reads.
func (m *Metrics) Counters(subsystem, name, help, label string, fns map[string]func() uint64) {
	for v, f := range fns {
		m.Counter(subsystem, name, help, prometheus.Labels{label: v}, U64(f))
	}
}

// Label is a one-pair label set.
func Label(k, v string) prometheus.Labels { return prometheus.Labels{k: v} }

// U64 adapts an atomic counter read to a metric func.
func U64(fn func() uint64) func() float64 { return func() float64 { return float64(fn()) } }
