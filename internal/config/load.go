package config

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LoadOptions are the sources Load reads besides the defaults.
type LoadOptions struct {
	// File is the YAML file (--config); empty means none.
	File string
	// Env looks up an environment variable; pass os.LookupEnv. Nil means
	// an empty environment. A variable set to "" counts as unset, as in
	// EPICS Base's envGetConfigParam.
	Env func(string) (string, bool)
	// Flags holds the flags the user set explicitly, by name without
	// dashes ("http-listen"). FlagValues.Values gives this map.
	Flags map[string]string
	// Resolve resolves host names in address lists; nil means
	// SystemResolver.
	Resolve Resolver
	// Profile, if not nil, changes the defaults before any source is
	// read (RelayProfile for `pvans relay`); every source still overrides.
	Profile func(*Config)
}

// RelayProfile is the defaults of `pvans relay`: the relay profile
// (relay.only) with the HTTP endpoint off unless a source sets it.
func RelayProfile(c *Config) {
	c.Relay.Only = true
	c.HTTP.Listen = ""
}

// Load builds a Config from defaults, then the file, then the environment,
// then the flags, each overriding the last. Every source is parsed, and
// every problem in any of them is returned together in one *Error; on
// error the Config is nil, never half-configured.
func Load(opts LoadOptions) (*Config, error) {
	c := Defaults()
	if opts.Profile != nil {
		opts.Profile(&c)
	}
	c.opts = copyOptions(opts)
	c.loaded = true
	c.prov = make(map[string]origin)

	var ps problems
	x := &loadCtx{resolve: opts.Resolve}
	if x.resolve == nil {
		x.resolve = SystemResolver
	}

	var fileVals map[string]raw
	if opts.File != "" {
		fileVals = readFile(opts.File, &ps, &c.warnings)
	}
	flagVals := make(map[string]raw, len(opts.Flags))
	for _, name := range sortedKeys(opts.Flags) {
		v := opts.Flags[name]
		name = strings.TrimLeft(name, "-")
		if name == "config" {
			continue
		}
		s := specByFlg[name]
		if key, ok := removedByFlag[name]; ok && s == nil {
			c.warnings = append(c.warnings, removedWarning("flag --"+name, key, v))
			continue
		}
		if s == nil {
			ps.add("", "--"+name, v, "unknown flag")
			continue
		}
		flagVals[s.key] = raw{text: v, items: strings.Fields(v), o: origin{kind: srcFlag, name: "--" + name, text: v}}
	}

	failed := make(map[string]bool)
	// Ports first: the address lists take their default port from them.
	for _, late := range []bool{false, true} {
		for _, s := range specs {
			if s.late != late {
				continue
			}
			var srcs []raw
			if v, ok := fileVals[s.key]; ok {
				srcs = append(srcs, v)
			}
			if v, ok := lookupEnv(opts.Env, s.env); ok {
				srcs = append(srcs, v)
			}
			if v, ok := flagVals[s.key]; ok {
				srcs = append(srcs, v)
			}
			for _, v := range srcs {
				if err := s.set(&c, x, v); err != nil {
					where, setting := v.o.setting(s.key)
					ps.add(where, setting, v.o.text, err.Error())
					failed[s.key] = true
					continue
				}
				c.prov[s.key] = v.o
			}
		}
	}

	c.validate(&ps, failed)
	if err := ps.err(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Reload loads again from the sources prev was loaded from (re-reading the
// file and the environment), for SIGHUP. On any problem it returns prev,
// unchanged, with the error: the daemon keeps its last good configuration.
func Reload(prev *Config) (*Config, error) {
	if prev == nil || !prev.loaded {
		return prev, errors.New("config: Reload needs a Config made by Load")
	}
	next, err := Load(prev.opts)
	if err != nil {
		return prev, err
	}
	return next, nil
}

// Validate checks every value, collecting all problems into one *Error.
// Load calls it; call it yourself on a Config built or edited in code.
func (c *Config) Validate() error {
	var ps problems
	c.validate(&ps, nil)
	return ps.err()
}

func (c *Config) validate(ps *problems, skip map[string]bool) {
	for _, s := range specs {
		if s.check == nil || skip[s.key] {
			continue
		}
		why := s.check(c)
		if why == "" {
			continue
		}
		o, ok := c.prov[s.key]
		where, setting := o.setting(s.key)
		value := o.text
		if !ok || o.kind == srcDefault || o.kind == srcDerived {
			value = s.get(c)
		}
		ps.add(where, setting, value, why)
	}
}

// Setting is one line of the effective configuration.
type Setting struct {
	Key    string // file key, e.g. "pva.server_port"
	Value  string // effective value, formatted as it would be written
	Source string // "default", "file PATH", "env NAME", "flag --NAME" or "derived from ..."
}

// Provenance lists every setting with its effective value and where it
// came from, in reference-doc order, for `pvans check-config`.
func (c *Config) Provenance() []Setting {
	out := make([]Setting, len(specs))
	for i, s := range specs {
		out[i] = Setting{Key: s.key, Value: s.get(c), Source: c.prov[s.key].String()}
	}
	return out
}

// Changed lists the keys whose effective values differ between two
// configurations, so a reload can say what it changed (and the daemon can
// warn about settings that need a restart).
func Changed(prev, next *Config) []string {
	var out []string
	for _, s := range specs {
		if s.get(prev) != s.get(next) {
			out = append(out, s.key)
		}
	}
	return out
}

func lookupEnv(env func(string) (string, bool), names []string) (raw, bool) {
	if env == nil {
		return raw{}, false
	}
	for _, n := range names {
		v, ok := env(n)
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		return raw{text: v, items: strings.Fields(v), o: origin{kind: srcEnv, name: n, text: v}}, true
	}
	return raw{}, false
}

func readFile(path string, ps *problems, warnings *[]string) map[string]raw {
	data, err := os.ReadFile(path)
	if err != nil {
		ps.add("", "--config", path, "cannot read: "+unwrapPath(err))
		return nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		ps.add(path, "--config", path, "not valid YAML: "+strings.TrimPrefix(err.Error(), "yaml: "))
		return nil
	}
	out := make(map[string]raw)
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return out // empty file: all defaults
	}
	root := deref(doc.Content[0])
	if isNull(root) {
		return out
	}
	at := func(n *yaml.Node) string { return fmt.Sprintf("%s:%d", path, n.Line) }
	if root.Kind != yaml.MappingNode {
		ps.add(at(root), "--config", path, "top level must be a mapping of sections ("+strings.Join(sectionNames(), ", ")+")")
		return out
	}
	seenSec := make(map[string]bool)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], deref(root.Content[i+1])
		sec := k.Value
		if !sections[sec] {
			ps.add(at(k), sec, "", "unknown section (known: "+strings.Join(sectionNames(), ", ")+")")
			continue
		}
		if seenSec[sec] {
			ps.add(at(k), sec, "", "section appears twice")
			continue
		}
		seenSec[sec] = true
		if isNull(v) {
			continue
		}
		if v.Kind != yaml.MappingNode {
			ps.add(at(v), sec, v.Value, "section must be a mapping of keys")
			continue
		}
		for j := 0; j+1 < len(v.Content); j += 2 {
			kk, vv := v.Content[j], deref(v.Content[j+1])
			key := sec + "." + kk.Value
			s := specByKey[key]
			if _, ok := removed[key]; ok && s == nil {
				*warnings = append(*warnings, removedWarning("file "+at(kk), key, vv.Value))
				continue
			}
			if s == nil {
				ps.add(at(kk), key, vv.Value, "unknown key")
				continue
			}
			if _, dup := out[key]; dup {
				ps.add(at(kk), key, vv.Value, "key appears twice")
				continue
			}
			o := origin{kind: srcFile, name: path, line: kk.Line}
			switch {
			case isNull(vv):
				out[key] = raw{o: o}
			case vv.Kind == yaml.ScalarNode:
				o.text = vv.Value
				out[key] = raw{text: vv.Value, items: strings.Fields(vv.Value), o: o}
			case vv.Kind == yaml.SequenceNode && s.isList:
				items := make([]string, 0, len(vv.Content))
				ok := true
				for _, it := range vv.Content {
					it = deref(it)
					if it.Kind != yaml.ScalarNode || isNull(it) {
						ps.add(at(it), key, it.Value, "list items must be plain values")
						ok = false
						break
					}
					items = append(items, it.Value)
				}
				if ok {
					o.text = strings.Join(items, " ")
					out[key] = raw{text: o.text, items: items, o: o}
				}
			case vv.Kind == yaml.SequenceNode:
				ps.add(at(vv), key, "", "expected a single value, not a list")
			default:
				ps.add(at(vv), key, "", "expected a value, not a mapping")
			}
		}
	}
	return out
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

func sectionNames() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range specs {
		sec, _, _ := strings.Cut(s.key, ".")
		if !seen[sec] {
			seen[sec] = true
			out = append(out, sec)
		}
	}
	return out
}

func unwrapPath(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func copyOptions(o LoadOptions) LoadOptions {
	if o.Flags != nil {
		f := make(map[string]string, len(o.Flags))
		for k, v := range o.Flags {
			f[k] = v
		}
		o.Flags = f
	}
	return o
}
