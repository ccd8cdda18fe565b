//go:build !race

package insight

const raceEnabled = false
