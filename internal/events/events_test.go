package events

import (
	"strconv"
	"testing"
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
