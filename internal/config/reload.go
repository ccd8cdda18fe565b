package config

import "slices"

// A setting's row says what a reload (SIGHUP, systemctl reload) does with
// a changed value, in one of two classes:
//
//   - restart: the part that uses it takes it once, when it is built (a
//     socket bound, a queue allocated), so a changed value waits for the
//     next start. The daemon reads it from the configuration it started
//     with, logs each changed one as needing a restart at every reload,
//     `pvans check-config` marks it and the reference table says so.
//   - live: the parts the row names apply it; the daemon calls each part's
//     one applier (internal/daemon, appliers) when a setting naming it
//     changed. The row also says from when the new value holds.
//
// A new setting picks its class in its row; nothing else lists it.

// Part names what applies live settings on reload: one applier each in
// the daemon's table (internal/daemon, appliers).
type Part string

// reloadClass is a row's reload class: restart-only, with why, or live,
// with the parts that apply it and from when.
type reloadClass struct {
	restart string // why a reload cannot apply it; "" for a live setting
	parts   []Part
	when    string
}

// restart: the setting takes effect only at the next start, because why.
func restart(why string) reloadClass { return reloadClass{restart: why} }

// live: parts apply the setting on reload; when says from when it holds.
func live(when string, parts ...Part) reloadClass {
	return reloadClass{parts: parts, when: when}
}

// NeedsRestart reports whether a changed value of the setting key takes
// effect only at the next start, and why.
func NeedsRestart(key string) (bool, string) {
	s := specByKey[key]
	if s == nil || s.reload.restart == "" {
		return false, ""
	}
	return true, s.reload.restart
}

// AppliedBy returns the parts that apply a live setting on reload, and
// from when its new value holds; no parts for a restart-only setting or
// an unknown key.
func AppliedBy(key string) (parts []Part, when string) {
	s := specByKey[key]
	if s == nil {
		return nil, ""
	}
	return s.reload.parts, s.reload.when
}

// Parts lists every part a setting names, each once, in the table's
// order.
func Parts() []Part {
	var out []Part
	for _, s := range specs {
		for _, p := range s.reload.parts {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}
