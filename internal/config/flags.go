package config

import (
	"flag"
	"fmt"
	"strings"
)

// FlagValues collects the flags RegisterFlags defined. Only flags the user
// actually set are recorded, so an unset flag never hides the environment
// or the file.
type FlagValues struct {
	// ConfigFile is --config.
	ConfigFile string
	set        map[string]string
}

// RegisterFlags defines --config and one flag per setting on fs. After
// fs.Parse, pass fv.Options(os.LookupEnv) to Load. Boolean settings are
// boolean flags (--search-through, --search-through=false); list settings
// take one whitespace-separated string.
func RegisterFlags(fs *flag.FlagSet) *FlagValues {
	fv := &FlagValues{set: make(map[string]string)}
	fs.StringVar(&fv.ConfigFile, "config", "", "YAML configuration `file`")
	def := Defaults()
	for _, s := range specs {
		usage := s.usage
		var notes []string
		if len(s.env) > 0 {
			notes = append(notes, "env "+strings.Join(s.env, ", then "))
		}
		if d := s.get(&def); d != "" {
			notes = append(notes, fmt.Sprintf("default %s", d))
		}
		notes = append(notes, "file "+s.key)
		usage += " (" + strings.Join(notes, "; ") + ")"
		fs.Var(&flagValue{fv: fv, name: s.flag, isBool: s.isBool}, s.flag, usage)
	}
	// A removed setting's flag still parses, so an old unit file or script
	// starts; Load warns that it is ignored. pvans's help (References)
	// does not list it.
	for name, key := range removedByFlag {
		fs.Var(&flagValue{fv: fv, name: name, isBool: false}, name, "removed: "+key+" is now a constant; ignored with a warning")
	}
	return fv
}

// Values returns the explicitly set flags by name, for LoadOptions.Flags.
func (fv *FlagValues) Values() map[string]string {
	out := make(map[string]string, len(fv.set))
	for k, v := range fv.set {
		out[k] = v
	}
	return out
}

// Options returns LoadOptions for the parsed flags and env (os.LookupEnv).
func (fv *FlagValues) Options(env func(string) (string, bool)) LoadOptions {
	return LoadOptions{File: fv.ConfigFile, Env: env, Flags: fv.Values()}
}

// flagValue stores the text as given; Load parses and validates it with
// everything else, so all problems are reported together.
type flagValue struct {
	fv     *FlagValues
	name   string
	isBool bool
}

func (v *flagValue) String() string {
	if v == nil || v.fv == nil {
		return ""
	}
	return v.fv.set[v.name]
}

func (v *flagValue) Set(s string) error {
	v.fv.set[v.name] = s
	return nil
}

func (v *flagValue) IsBoolFlag() bool { return v.isBool }
