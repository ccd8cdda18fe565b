//go:build race

package insight

// raceEnabled skips the memory-size test: the race detector's shadow
// memory makes heap figures meaningless, and 1M names take minutes.
const raceEnabled = true
