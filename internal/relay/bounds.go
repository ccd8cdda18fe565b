package relay

// BurstSeconds is the Burst the daemon gives Limits (issue 40: a constant,
// not a setting): this many seconds of relay.DefaultPerSecond at once, so
// 1,000 IOCs starting together (2,000 sightings at the default 500/s)
// pass and a storm is cut after it.
const BurstSeconds = 4

// DefaultPerSecond bounds the sightings relayed (each to every relay.to
// destination): 1,000 IOCs beaconing every 15 s at start are 67/s, so
// 500/s is ample, and a storm of forged beacons reaching the relay
// reaches the central side at this rate at most. What is dropped beyond it
// (pvans_relay_dropped_total) comes again with the server's next beacon.
const DefaultPerSecond = 500
