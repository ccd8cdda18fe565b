package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/pvans-project/pvans/internal/config"
)

// TestManualHasRealFlags: the pages and completions are written from the
// commands' own flag sets: run and check-config take every setting's flag
// and --config, and each other command lists the flags it parses.
func TestManualHasRealFlags(t *testing.T) {
	m := manual()
	flags := map[string]map[string]bool{}
	for _, c := range m.Commands {
		flags[c.Name] = map[string]bool{}
		for _, f := range c.Flags {
			flags[c.Name][f.Name] = true
		}
	}
	for _, cmd := range []string{"run", "check-config"} {
		for _, r := range config.References() {
			if !flags[cmd][r.Flag] {
				t.Errorf("%s: no --%s (%s)", cmd, r.Flag, r.Key)
			}
		}
		for _, f := range []string{"config", "version", "V", "v"} {
			if !flags[cmd][f] {
				t.Errorf("%s: no -%s", cmd, f)
			}
		}
	}
	for cmd, want := range map[string][]string{"query": {"server", "timeout"}, "list": {"api", "names", "duplicates"}, "demo": {"servers", "do"}} {
		for _, f := range want {
			if !flags[cmd][f] {
				t.Errorf("%s: no --%s", cmd, f)
			}
		}
	}
	if _, ok := flags["man"]; ok {
		t.Errorf("the hidden man command is described")
	}
	var out, errb strings.Builder
	if code := run([]string{"man", "5"}, &out, &errb); code != 0 {
		t.Fatalf("pvans man 5: %d %s", code, errb.String())
	}
	for _, r := range config.References() {
		if !strings.Contains(out.String(), `\fB`+strings.ReplaceAll(r.Key, "-", `\-`)+`\fR`) {
			t.Errorf("pvans.yaml(5) does not describe %s", r.Key)
		}
	}
	for _, args := range [][]string{{"man"}, {"man", "7"}, {"completion"}, {"completion", "fish"}} {
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("pvans %s: exit %d, want 2", strings.Join(args, " "), code)
		}
	}
}

// README's command list names every command `pvans help` lists, and the
// Go version it asks for is go.mod's.
func TestReadmeNamesEveryCommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skip("no README.md:", err)
	}
	_, list, ok := strings.Cut(string(readme), "\n## Commands\n")
	if !ok {
		t.Fatal("README.md has no \"## Commands\" section")
	}
	list, _, _ = strings.Cut(list, "\n## ")
	for _, c := range commands {
		if c.hidden || c.name == "help" {
			continue
		}
		if !strings.Contains(list, "    pvans "+c.name) && !strings.Contains(list, "    pvans ["+c.name+"]") {
			t.Errorf("README's Commands section does not list `pvans %s`", c.name)
		}
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if goVersion == nil {
		t.Fatal("go.mod has no go line")
	}
	for _, m := range regexp.MustCompile(`Go (1\.\d+(?:\.\d+)?) or newer`).FindAllStringSubmatch(string(readme), -1) {
		if m[1] != string(goVersion[1]) {
			t.Errorf("README asks for Go %s or newer; go.mod needs %s", m[1], goVersion[1])
		}
	}
}
