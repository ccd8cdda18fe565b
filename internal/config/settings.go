package config

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// raw is one value as a source wrote it.
type raw struct {
	text  string
	items []string // list settings: YAML sequence items, or the text split on whitespace
	o     origin
}

type loadCtx struct {
	resolve Resolver
}

// spec is one setting: its names in every source, its default, how to
// parse, print and check it. The table below is the single list the file
// keys, flags, environment, defaults, provenance, validation and the
// reference doc all come from.
type spec struct {
	key   string   // file key, "section.name"
	flag  string   // flag name without dashes
	env   []string // environment variables, first set one wins (PVXS pickone)
	usage string
	// ptr is the Config field the setting is held in, as a pointer, for
	// Fill.
	ptr func(c *Config) any
	// def is the production default as a file would write it; Defaults
	// parses it with set, so it is the one place the value is written.
	def string
	// reload is what a reload does with a changed value (reload.go).
	reload reloadClass
	// doc is the comment above the key in configs/pvans.yaml, when it has
	// more to say than usage ("": usage). The example file is written from
	// the rows (TestProductionExample).
	doc    string
	isBool bool
	isList bool
	late   bool // parsed after the ports, which give list entries their default port
	set    func(c *Config, x *loadCtx, v raw) error
	get    func(c *Config) string
	check  func(c *Config) string // "" when fine, else why not
}

var (
	specs     []*spec
	specByKey = map[string]*spec{}
	specByFlg = map[string]*spec{}
	sections  = map[string]bool{}
)

// add appends one row: the setting s, its default def (see spec.def),
// its reload class r (restart or live) and the example file's comment doc
// (see spec.doc).
func add(s spec, def string, r reloadClass, doc string) {
	s.def, s.reload, s.doc = def, r, doc
	sec, _, _ := strings.Cut(s.key, ".")
	if s.flag == "" {
		s.flag = flagName(s.key)
	}
	p := &s
	specs = append(specs, p)
	specByKey[s.key] = p
	specByFlg[s.flag] = p
	sections[sec] = true
}

// init registers the rows section by section, in the order the reference
// doc, the example file and check-config list them.
func init() {
	pvaRows()
	httpRows()
	logRows()
	snapshotRows()
	registryRows()
	tcpRows()
	udpRows()
	beaconRows()
	staticRows()
	searchRows()
	accessRows()
	mapRows()
	rateLimitRows()
	discoveryRows()
	dnsRows()
	relayRows()
	insightRows()
}

// field is a spec's ptr: the Config field p points to.
func field[T any](p func(*Config) *T) func(*Config) any {
	return func(c *Config) any { return p(c) }
}

// setTo is a spec's set for a value parse makes alone (no other setting
// involved): it stores the result through p, or refuses the value.
func setTo[T any](p func(*Config) *T, parse func(raw) (T, error)) func(*Config, *loadCtx, raw) error {
	return func(c *Config, _ *loadCtx, v raw) error {
		x, err := parse(v)
		if err != nil {
			return err
		}
		*p(c) = x
		return nil
	}
}

// fromText and fromItems hand a parser a value's text or its list items.
func fromText[T any](parse func(string) (T, error)) func(raw) (T, error) {
	return func(v raw) (T, error) { return parse(v.text) }
}

func fromItems[T any](parse func([]string) (T, error)) func(raw) (T, error) {
	return func(v raw) (T, error) { return parse(v.items) }
}

// joined is a list setting's get: its items as a source would write them.
func joined[T fmt.Stringer](p func(*Config) *[]T) func(*Config) string {
	return func(c *Config) string { return joinStrings(*p(c)) }
}

// checkEach is a list setting's check: reason when ok refuses an item.
func checkEach[T any](p func(*Config) *[]T, ok func(T) bool, reason string) func(*Config) string {
	return func(c *Config) string {
		for _, x := range *p(c) {
			if !ok(x) {
				return reason
			}
		}
		return ""
	}
}

func parsePort(s string) (uint16, error) { return parsePortNumber(strings.TrimSpace(s), false) }

func portSpec(key string, env []string, usage string, p func(*Config) *uint16) spec {
	return spec{key: key, ptr: field(p), env: env, usage: usage, set: setTo(p, fromText(parsePort)),
		get: func(c *Config) string { return strconv.Itoa(int(*p(c))) },
		check: func(c *Config) string {
			if *p(c) == 0 {
				return "port must be 1-65535"
			}
			return ""
		}}
}

// ParseBool parses an EPICS YES/NO value, case-insensitive, also accepting
// true/false and 1/0.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yes", "true", "1":
		return true, nil
	case "no", "false", "0":
		return false, nil
	}
	return false, errors.New("must be YES or NO (or true/false, 1/0)")
}

func boolSpec(key string, env []string, epics bool, usage string, p func(*Config) *bool) spec {
	return spec{key: key, ptr: field(p), env: env, usage: usage, isBool: true, set: setTo(p, fromText(ParseBool)),
		get: func(c *Config) string {
			if epics {
				if *p(c) {
					return "YES"
				}
				return "NO"
			}
			return strconv.FormatBool(*p(c))
		}}
}

func parseInt(s string) (int64, error) {
	t := strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	n, err := strconv.ParseInt(t, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, errors.New("number out of range")
	}
	if err != nil {
		return 0, errors.New("not an integer")
	}
	return n, nil
}

func rangeReason(n, lo, hi int64, unit string) string {
	if n < lo || n > hi {
		return fmt.Sprintf("must be between %d%s and %d%s", lo, unit, hi, unit)
	}
	return ""
}

func intSpec(key, usage string, lo, hi int, p func(*Config) *int) spec {
	toInt := func(s string) (int, error) {
		n, err := parseInt(s)
		return int(n), err
	}
	return spec{key: key, ptr: field(p), usage: usage, set: setTo(p, fromText(toInt)),
		get:   func(c *Config) string { return strconv.Itoa(*p(c)) },
		check: func(c *Config) string { return rangeReason(int64(*p(c)), int64(lo), int64(hi), "") }}
}

var byteUnits = []struct {
	suffix string
	mult   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

// parseBytes reads a byte count: an integer with an optional KiB, MiB or
// GiB suffix (case-insensitive).
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if len(t) >= len(u.suffix) && strings.EqualFold(t[len(t)-len(u.suffix):], u.suffix) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := parseInt(t)
	if err != nil {
		return 0, errors.New("not a byte count (integer with optional KiB, MiB or GiB)")
	}
	if n > math.MaxInt64/mult || n < math.MinInt64/mult {
		return 0, errors.New("number out of range")
	}
	return n * mult, nil
}

func formatBytes(n int64) string {
	for _, u := range byteUnits {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func bytesSpec(key, usage string, lo, hi int64, p func(*Config) *int64) spec {
	return spec{key: key, ptr: field(p), usage: usage, set: setTo(p, fromText(parseBytes)),
		get: func(c *Config) string { return formatBytes(*p(c)) },
		check: func(c *Config) string {
			if n := *p(c); n < lo || n > hi {
				return fmt.Sprintf("must be between %s and %s", formatBytes(lo), formatBytes(hi))
			}
			return ""
		}}
}

// parseDuration reads a Go duration ("90s", "5m") or a plain number of
// seconds, the EPICS habit.
func parseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(t, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > float64(math.MaxInt64/int64(time.Second)) {
			return 0, errors.New("duration out of range")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, errors.New(`not a duration (e.g. "90s", "5m" or a number of seconds)`)
	}
	return d, nil
}

func durSet(p func(*Config) *time.Duration) func(*Config, *loadCtx, raw) error {
	return setTo(p, fromText(parseDuration))
}

// durSpec: hi 0 means no upper bound.
func durSpec(key, usage string, lo, hi time.Duration, p func(*Config) *time.Duration) spec {
	return spec{key: key, ptr: field(p), usage: usage, set: durSet(p),
		get: func(c *Config) string { return p(c).String() },
		check: func(c *Config) string {
			d := *p(c)
			if d < lo {
				return fmt.Sprintf("must be at least %s", lo)
			}
			if hi > 0 && d > hi {
				return fmt.Sprintf("must be at most %s", hi)
			}
			return ""
		}}
}

func parseFinite(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("not a finite number")
	}
	return f, nil
}

func floatSpec(key, usage string, lo, hi float64, p func(*Config) *float64) spec {
	return spec{key: key, ptr: field(p), usage: usage, set: setTo(p, fromText(parseFinite)),
		get: func(c *Config) string { return strconv.FormatFloat(*p(c), 'g', -1, 64) },
		check: func(c *Config) string {
			if f := *p(c); !(f >= lo && f <= hi) {
				return fmt.Sprintf("must be between %g and %g", lo, hi)
			}
			return ""
		}}
}

func enumSpec(key, usage string, allowed []string, p func(*Config) *string) spec {
	return spec{key: key, ptr: field(p), usage: usage,
		set: func(c *Config, _ *loadCtx, v raw) error {
			*p(c) = strings.ToLower(strings.TrimSpace(v.text))
			return nil
		},
		get: func(c *Config) string { return *p(c) },
		check: func(c *Config) string {
			for _, a := range allowed {
				if *p(c) == a {
					return ""
				}
			}
			return "must be one of " + strings.Join(allowed, ", ")
		}}
}

// addrListSpec is a list of addresses and ports (the full address spec is
// parsed; TTLs and interfaces, which only multicast destinations use, are
// dropped). A nil defPort gives the ignore-list form (port 0 = any). With
// unicastOnly a multicast entry is refused (TCP cannot reach a group).
//
// entries, if not nil, receives the list as written too, host names kept
// (Endpoint.Host), for the daemon to resolve them again.
func addrListSpec(key string, env []string, usage string, defPort func(*Config) uint16, unicastOnly bool, p func(*Config) *[]netip.AddrPort, entries func(*Config) *[]Endpoint) spec {
	return spec{key: key, ptr: field(p), env: env, usage: usage, isList: true, late: true,
		set: func(c *Config, x *loadCtx, v raw) error {
			var port uint16
			if defPort != nil {
				port = defPort(c)
			}
			l, err := parseEndpoints(v.items, port, x.resolve)
			if err != nil {
				return err
			}
			if unicastOnly {
				for _, e := range l {
					if e.IsMulticast() {
						return fmt.Errorf("%s is a multicast group; TCP cannot reach a group", e)
					}
				}
			}
			*p(c) = AddrPorts(merged(l))
			if entries != nil {
				*entries(c) = l
			}
			return nil
		},
		get: joined(p),
		check: func(c *Config) string {
			for _, ap := range *p(c) {
				if !ap.Addr().IsValid() {
					return "invalid address in list"
				}
				if defPort != nil && ap.Port() == 0 {
					return fmt.Sprintf("%s: port must be 1-65535", ap)
				}
			}
			return ""
		}}
}

// endpointListSpec is a list of UDP destinations with their multicast TTL
// and interface (PVXS SockEndpoint).
func endpointListSpec(key string, env []string, usage string, defPort func(*Config) uint16, p func(*Config) *[]Endpoint) spec {
	return spec{key: key, ptr: field(p), env: env, usage: usage, isList: true, late: true,
		set: func(c *Config, x *loadCtx, v raw) error {
			l, err := parseEndpoints(v.items, defPort(c), x.resolve)
			if err != nil {
				return err
			}
			*p(c) = l
			return nil
		},
		// Entries kept apart only by their host names print once.
		get: func(c *Config) string { return joinStrings(merged(*p(c))) },
		check: func(c *Config) string {
			for _, e := range *p(c) {
				if !e.Addr().IsValid() || e.Addr().Zone() != "" {
					return "invalid address in list"
				}
				if e.Port() == 0 {
					return fmt.Sprintf("%s: port must be 1-65535", e)
				}
				if e.TTL < NoTTL || e.TTL > 255 {
					return fmt.Sprintf("%s: TTL must be 0-255", e)
				}
			}
			return ""
		}}
}

func prefixSpec(key, usage string, p func(*Config) *[]netip.Prefix) spec {
	return spec{key: key, ptr: field(p), usage: usage, isList: true, set: setTo(p, fromItems(ParsePrefixList)), get: joined(p),
		check: checkEach(p, netip.Prefix.IsValid, "invalid prefix in list")}
}

func patternSpec(key, usage string, p func(*Config) *[]NamePattern) spec {
	return spec{key: key, ptr: field(p), usage: usage, isList: true, set: setTo(p, fromItems(parseNamePatterns)), get: joined(p),
		check: checkEach(p, func(q NamePattern) bool { return q.text != "" }, "pattern not built with ParseNamePattern")}
}

func joinStrings[T fmt.Stringer](l []T) string {
	parts := make([]string, len(l))
	for i, x := range l {
		parts[i] = x.String()
	}
	return strings.Join(parts, " ")
}

// relayToSpec refuses multicast and limited broadcast destinations in
// relay.to unless relay.to_broadcast says they are meant. (A directed
// broadcast is known only from the host's networks: the relay skips one
// when it sends.)
func relayToSpec(sp spec) spec {
	each := sp.check
	sp.check = func(c *Config) string {
		if m := each(c); m != "" {
			return m
		}
		if c.Relay.ToBroadcast {
			return ""
		}
		for _, e := range c.Relay.To {
			if a := e.Addr().Unmap(); a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
				return fmt.Sprintf("%s is a multicast or broadcast destination: a relay sends to central pvans instances one by one (set relay.to_broadcast: true if it is meant)", e)
			}
		}
		return ""
	}
	return sp
}
