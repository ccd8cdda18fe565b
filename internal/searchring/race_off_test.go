//go:build !race

package searchring

const raceEnabled = false
