package config

import (
	"fmt"
	"strings"
)

// Problem is one refused value: which setting (as the operator wrote it:
// environment variable, --flag or file key), the value, and why.
type Problem struct {
	Where   string // file and line for file values; empty otherwise
	Setting string // e.g. EPICS_PVAS_SERVER_PORT, --http-listen, tcp.max_connections
	Value   string
	Reason  string
}

func (p *Problem) Error() string {
	s := fmt.Sprintf("%s=%q: %s", p.Setting, p.Value, p.Reason)
	if p.Where != "" {
		s = p.Where + ": " + s
	}
	return s
}

// Error is every problem found in one Load or Validate, in setting order,
// so the operator fixes them all in one go.
type Error struct {
	Problems []*Problem
}

func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return "invalid configuration: " + e.Problems[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid configuration (%d problems):", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap lets errors.As find a single *Problem.
func (e *Error) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

type problems []*Problem

// add records a problem once: an environment variable read for two
// settings (EPICS_PVA_ADDR_LIST) must not be reported twice.
func (ps *problems) add(where, setting, value, reason string) {
	for _, p := range *ps {
		if p.Where == where && p.Setting == setting && p.Value == value && p.Reason == reason {
			return
		}
	}
	*ps = append(*ps, &Problem{Where: where, Setting: setting, Value: value, Reason: reason})
}

func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &Error{Problems: ps}
}

type sourceKind uint8

const (
	srcDefault sourceKind = iota
	srcDerived
	srcFile
	srcEnv
	srcFlag
)

// origin is where one value came from, with the text as written so errors
// and check-config show what the operator typed.
type origin struct {
	kind sourceKind
	name string // env variable, flag (with --) or file path
	line int    // file line, 0 if unknown
	text string
}

func (o origin) String() string {
	switch o.kind {
	case srcDerived:
		return "derived from " + o.name
	case srcFile:
		return "file " + o.name
	case srcEnv:
		return "env " + o.name
	case srcFlag:
		return "flag " + o.name
	}
	return "default"
}

// setting is how a problem names the value: the way the operator set it.
func (o origin) setting(key string) (where, setting string) {
	switch o.kind {
	case srcEnv, srcFlag:
		return "", o.name
	case srcFile:
		if o.line > 0 {
			return fmt.Sprintf("%s:%d", o.name, o.line), key
		}
		return o.name, key
	}
	return "", key
}
