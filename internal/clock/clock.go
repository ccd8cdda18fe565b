// Package clock lets time enter the daemon through one small interface, so
// the search ring, beacon expiry and probe schedules can be tested exactly
// with a fake clock instead of sleeping.
package clock

import "time"

// Timer is the part of *time.Timer the daemon uses.
type Timer interface {
	// Stop prevents the timer from firing; it reports whether it was pending.
	Stop() bool
}

// Clock tells the time and runs functions later.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (real clock) or synchronously
	// from Advance (fake clock) once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
