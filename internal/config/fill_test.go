package config

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// Every row's ptr is a field of the Config it is given: Fill reads the
// value the row parses and prints.
func TestEveryRowPointsIntoConfig(t *testing.T) {
	var c Config
	lo := uintptr(unsafe.Pointer(&c))
	hi := lo + unsafe.Sizeof(c)
	for _, s := range specs {
		if s.ptr == nil {
			t.Errorf("%s has no ptr", s.key)
			continue
		}
		v := reflect.ValueOf(s.ptr(&c))
		if v.Kind() != reflect.Pointer || v.Pointer() < lo || v.Pointer() >= hi {
			t.Errorf("%s: ptr is not a field of the Config", s.key)
		}
	}
}

type fillTarget struct {
	Conns    int            `setting:"tcp.max_connections"`
	Wide     int64          `setting:"tcp.max_connections"` // int in Config
	Rate     float64        `setting:"rate_limit.tcp_messages_per_second"`
	Exempt   []netip.Prefix `setting:"rate_limit.exempt"`
	Computed string
}

func TestFill(t *testing.T) {
	c := Defaults()
	c.RateLimit.Exempt = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	got := fillTarget{Computed: "kept"}
	Fill("tcp", &got, &c)
	want := fillTarget{Conns: c.TCP.MaxConnections, Wide: int64(c.TCP.MaxConnections), Rate: c.RateLimit.TCPMessagesPerSecond,
		Exempt: c.RateLimit.Exempt, Computed: "kept"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Fill = %+v, want %+v", got, want)
	}

	for _, tc := range []struct {
		name, why string
		dst       any
		part      Part
	}{
		{"unknown key", "not a setting", &struct {
			X int `setting:"tcp.nothing"`
		}{}, "tcp"},
		{"row without the part", `does not name the part "udp"`, &fillTarget{}, "udp"},
		{"restart-only", `does not name the part "udp"`, &struct {
			X bool `setting:"relay.only"`
		}{}, "udp"},
		{"integer to duration", "does not convert", &struct {
			X time.Duration `setting:"tcp.max_connections"`
		}{}, "tcp"},
		{"not a pointer", "not a pointer to a struct", fillTarget{}, "tcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r, _ := recover().(string); !strings.Contains(r, tc.why) {
					t.Errorf("panic %q, want one saying %q", r, tc.why)
				}
			}()
			Fill(tc.part, tc.dst, &c)
		})
	}
}

// FillAtStart takes restart-only settings too: a part's build-time options.
func TestFillAtStart(t *testing.T) {
	c := Defaults()
	c.Relay.Only = true
	var got struct {
		Only  bool `setting:"relay.only"`
		Names int  `setting:"insight.names"`
	}
	FillAtStart(&got, &c)
	if !got.Only || got.Names != c.Insight.Names {
		t.Errorf("FillAtStart = %+v", got)
	}
}
