// Package events keeps the last few hundred things that happened on the
// site (server appeared, restarted, lost, duplicate name seen) for the
// status page and the operator API. It is a bounded ring: old events fall
// off, nothing grows.
package events

import (
	"strings"
	"sync"
	"time"
)

// Event is one line of site history.
type Event struct {
	At       time.Time `json:"at"`
	Kind     string    `json:"kind"` // appeared, restarted, lost, listed, unlistable, duplicate, ...
	GUID     string    `json:"guid,omitempty"`
	Endpoint string    `json:"endpoint,omitempty"`
	Detail   string    `json:"detail,omitempty"`
}

// Log is a bounded, concurrency-safe ring of events.
type Log struct {
	mu   sync.Mutex
	buf  []Event
	next int
	full bool
	seq  uint64 // events added so far
}

// New returns a log keeping the last n events.
func New(n int) *Log {
	if n <= 0 {
		n = 1
	}
	return &Log{buf: make([]Event, n)}
}

// MaxDetail bounds an event's detail: it can carry what a server sent
// (a name, a status message in a probe error), of any length.
const MaxDetail = 512

// Add records an event; a detail over MaxDetail bytes is cut.
func (l *Log) Add(e Event) {
	if len(e.Detail) > MaxDetail {
		e.Detail = strings.ToValidUTF8(e.Detail[:MaxDetail], "") + "…"
	}
	l.mu.Lock()
	l.buf[l.next] = e
	l.seq++
	l.next++
	if l.next == len(l.buf) {
		l.next, l.full = 0, true
	}
	l.mu.Unlock()
}

// Recent returns up to n events, newest first.
func (l *Log) Recent(n int) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	size := l.next
	if l.full {
		size = len(l.buf)
	}
	if n <= 0 || n > size {
		n = size
	}
	out := make([]Event, 0, n)
	for i := 0; i < n; i++ {
		j := (l.next - 1 - i + len(l.buf)) % len(l.buf)
		out = append(out, l.buf[j])
	}
	return out
}

// Since returns the events added after the first seq ones, oldest first,
// and the new count to pass next time: a follower (the demo's narrator)
// polls it. Events that fell off the ring meanwhile are skipped.
func (l *Log) Since(seq uint64) ([]Event, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.seq - min(seq, l.seq)
	size := uint64(l.next)
	if l.full {
		size = uint64(len(l.buf))
	}
	n = min(n, size)
	out := make([]Event, 0, n)
	for i := n; i > 0; i-- {
		j := (l.next - int(i) + len(l.buf)) % len(l.buf)
		out = append(out, l.buf[j])
	}
	return out, l.seq
}
