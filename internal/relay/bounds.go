package relay

// BurstSeconds is the Burst the daemon gives Limits (issue 40: a constant,
// not a setting): this many seconds of relay.max_per_second at once, so
// 1,000 IOCs starting together (2,000 sightings at the default 500/s)
// pass and a storm is cut after it.
const BurstSeconds = 4
