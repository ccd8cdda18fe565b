package insight

// The options the daemon gives New beside insight.names (issue 40:
// constants, not settings).
const (
	// DefaultClients: searching client addresses kept per summary. A site
	// has far fewer searching hosts than searched names (insight.names
	// sizes those): 10,000 holds every host of a large site exactly, and
	// a count is off by at most (searches in the window)/10,000 beyond.
	DefaultClients = 10_000
	// DefaultQueueBytes: staging between the answer paths and the
	// summaries; beyond it searches are not summarised
	// (pvans_insight_dropped_names_total).
	DefaultQueueBytes = 4 << 20
	// DefaultDigestNamesPerSecond: a distinct name costs both windows'
	// name summaries 1–2 µs (cache misses, measured in the daemon,
	// docs/PERFORMANCE.md): 2000 bounds them to ~0.4 % of a core, while a
	// site's usual missing-name traffic (hundreds a second) is counted
	// exactly.
	DefaultDigestNamesPerSecond = 2000
	// DefaultGUIDChangesPerHour: more GUID changes than this at one server
	// endpoint within an hour is reported as an anomaly event; an IOC
	// restarted by hand a few times an hour is not one.
	DefaultGUIDChangesPerHour = 3
)
