package events

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRingKeepsNewestFirst(t *testing.T) {
	l := New(3)
	if got := l.Recent(10); len(got) != 0 {
		t.Fatalf("empty log returned %v", got)
	}
	for i := 0; i < 5; i++ {
		l.Add(Event{Kind: strconv.Itoa(i)})
	}
	got := l.Recent(10)
	if len(got) != 3 || got[0].Kind != "4" || got[1].Kind != "3" || got[2].Kind != "2" {
		t.Fatalf("got %+v", got)
	}
	if got := l.Recent(1); len(got) != 1 || got[0].Kind != "4" {
		t.Fatalf("Recent(1) = %+v", got)
	}
}

func TestSinceFollowsInOrder(t *testing.T) {
	l := New(3)
	got, seq := l.Since(0)
	if len(got) != 0 || seq != 0 {
		t.Fatalf("empty: %v %d", got, seq)
	}
	l.Add(Event{Kind: "a"})
	l.Add(Event{Kind: "b"})
	got, seq = l.Since(seq)
	if len(got) != 2 || got[0].Kind != "a" || got[1].Kind != "b" || seq != 2 {
		t.Fatalf("got %+v seq %d", got, seq)
	}
	if got, _ := l.Since(seq); len(got) != 0 {
		t.Fatalf("nothing new, got %+v", got)
	}
	for _, k := range []string{"c", "d", "e", "f"} { // c falls off the ring
		l.Add(Event{Kind: k})
	}
	got, seq = l.Since(seq)
	if len(got) != 3 || got[0].Kind != "d" || got[2].Kind != "f" || seq != 6 {
		t.Fatalf("after overflow %+v seq %d", got, seq)
	}
}

// A detail can carry a server's status message of any length: the ring is
// bounded in bytes too.
func TestDetailBounded(t *testing.T) {
	l := New(2)
	l.Add(Event{Kind: "lost", Detail: strings.Repeat("é", 40000)})
	ev := l.Recent(1)
	if len(ev) != 1 || len(ev[0].Detail) > MaxDetail+len("…") || !utf8.ValidString(ev[0].Detail) {
		t.Fatalf("detail kept at %d bytes (valid UTF-8: %v)", len(ev[0].Detail), utf8.ValidString(ev[0].Detail))
	}
}
