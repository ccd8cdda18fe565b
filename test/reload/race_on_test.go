//go:build race

package reload

// raceEnabled: the test binary runs under the race detector, so the
// daemon it starts is built with it too.
const raceEnabled = true
