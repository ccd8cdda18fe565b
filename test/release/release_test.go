// Package release tests scripts/release.sh: it builds the amd64 .deb, .rpm
// and tarball into a temporary folder through the script's own code path
// (ARCHES=amd64; arm64 only cross-compiles the same code) and checks what
// a site would install: files, conffile, unit, man pages, completion,
// licence and version, with the distributions' own tools.
package release

import (
	"bufio"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// changelogVersion is the newest release in CHANGELOG.md.
func changelogVersion(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+[^\]]*)\]`).FindSubmatch(data)
	if m == nil {
		t.Fatal("CHANGELOG.md has no release section")
	}
	return string(m[1])
}

func need(t *testing.T, tool, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Skipf("%s not installed (Debian package %s; scripts/test.sh installs it as root)", tool, pkg)
	}
	return p
}

func runTool(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// build runs the release script once for every test of the package.
var built struct {
	dist, version string
}

func release(t *testing.T) (dist, version string) {
	t.Helper()
	if built.dist != "" {
		return built.dist, built.version
	}
	need(t, "git", "git")
	root := repoRoot(t)
	version = changelogVersion(t, root)
	dist = t.TempDir()
	start := time.Now()
	out := runTool(t, root, []string{"ARCHES=amd64", "DIST=" + dist, "PVANS_ALLOW_DIRTY=1"}, filepath.Join(root, "scripts/release.sh"), version)
	t.Logf("scripts/release.sh %s (amd64) in %v:\n%s", version, time.Since(start).Round(time.Millisecond), out)
	built.dist, built.version = dist, version
	return dist, version
}

func TestRelease(t *testing.T) {
	dist, version := release(t)
	deb := filepath.Join(dist, "pvans_"+version+"-1_amd64.deb")
	rpm := filepath.Join(dist, "pvans-"+version+"-1.x86_64.rpm")
	tgz := filepath.Join(dist, "pvans-"+version+"-linux-amd64.tar.gz")
	for _, f := range []string{deb, rpm, tgz, filepath.Join(dist, "SHA256SUMS")} {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
	// Every package listed in SHA256SUMS with its right sum.
	if sha, err := exec.LookPath("sha256sum"); err == nil {
		out := runTool(t, dist, nil, sha, "-c", "SHA256SUMS")
		if strings.Count(out, ": OK") != 3 {
			t.Errorf("sha256sum -c SHA256SUMS:\n%s", out)
		}
	}

	// Files every package must install.
	want := []string{
		"/usr/bin/pvans",
		"/etc/pvans/pvans.yaml",
		"/usr/lib/systemd/system/pvans.service",
		"/usr/share/man/man1/pvans.1.gz",
		"/usr/share/man/man5/pvans.yaml.5.gz",
		"/usr/share/bash-completion/completions/pvans",
		"/usr/share/doc/pvans/operations.md",
		"/usr/share/doc/pvans/configuration.md",
		"/usr/share/doc/pvans/upgrading.md",
		"/usr/share/doc/pvans/SECURITY.md",
		"/usr/share/doc/pvans/protocol.md", // the other docs cite it
		// What operations.md sends an operator to.
		"/usr/share/doc/pvans/examples/pvans.env",
		"/usr/share/doc/pvans/examples/prometheus/alerts.yml",
		"/usr/share/doc/pvans/examples/grafana/pvans.json",
		"/usr/share/doc/pvans/examples/configs/local.yaml",
		"/usr/share/doc/pvans/examples/configs/replica.yaml",
		"/usr/share/doc/pvans/examples/configs/web-config.yml",
		"/usr/share/doc/pvans/examples/configs/reach/gateway-host.yaml",
	}
	debRoot := t.TempDir()
	t.Run("deb", func(t *testing.T) {
		dpkg := need(t, "dpkg-deb", "dpkg")
		fields := runTool(t, dist, nil, dpkg, "-f", deb)
		for _, f := range []string{"Package: pvans", "Version: " + version + "-1", "Architecture: amd64", "Section: net"} {
			if !strings.Contains(fields, f+"\n") {
				t.Errorf("control has no %q:\n%s", f, fields)
			}
		}
		runTool(t, dist, nil, dpkg, "-x", deb, debRoot)
		files := listTree(t, debRoot)
		for _, f := range append(want, "/usr/share/zsh/vendor-completions/_pvans", "/usr/share/doc/pvans/copyright",
			"/usr/share/doc/pvans/changelog.Debian.gz", "/usr/share/doc/pvans/changelog.gz") {
			if !slices.Contains(files, f) {
				t.Errorf("the .deb does not install %s", f)
			}
		}
		// The unit's ExecReload runs /bin/kill, which a minimal root
		// lacks without procps.
		if !regexp.MustCompile(`(?m)^Depends:.*\bprocps\b`).MatchString(fields) {
			t.Errorf("the .deb does not depend on procps (ExecReload's /bin/kill):\n%s", fields)
		}
		ctl := t.TempDir()
		runTool(t, dist, nil, dpkg, "-e", deb, ctl)
		conf, _ := os.ReadFile(filepath.Join(ctl, "conffiles"))
		if strings.TrimSpace(string(conf)) != "/etc/pvans/pvans.yaml" {
			t.Errorf("conffiles = %q, want /etc/pvans/pvans.yaml", conf)
		}
		// No maintainer script starts or enables the service.
		for _, s := range []string{"postinst", "prerm", "postrm"} {
			b, err := os.ReadFile(filepath.Join(ctl, s))
			if err != nil {
				t.Errorf("no %s: %v", s, err)
				continue
			}
			if regexp.MustCompile(`(?m)^[^#]*\b(start|enable|restart)\b`).Match(b) {
				t.Errorf("%s starts or enables something:\n%s", s, b)
			}
		}
		copyright, _ := os.ReadFile(filepath.Join(debRoot, "usr/share/doc/pvans/copyright"))
		if !strings.Contains(string(copyright), "License: BSD-3-Clause") || !strings.Contains(string(copyright), "The pvans authors") {
			t.Errorf("copyright file:\n%s", copyright)
		}
		checkBinary(t, filepath.Join(debRoot, "usr/bin/pvans"), version)
		// The installed README's links reach installed files.
		readme, err := os.ReadFile(filepath.Join(debRoot, "usr/share/doc/pvans/README.md"))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(readmeLinks(string(readme))); n < 10 {
			t.Errorf("the .deb's README has %d relative links, want the README's dozen", n)
		}
		for _, l := range readmeLinks(string(readme)) {
			if _, err := os.Stat(filepath.Join(debRoot, "usr/share/doc/pvans", l)); err != nil {
				t.Errorf("the .deb's README links %s, which it does not install", l)
			}
		}
	})
	t.Run("lintian", func(t *testing.T) {
		l := need(t, "lintian", "lintian")
		cmd := exec.Command(l, "--tag-display-limit", "0", deb)
		cmd.WaitDelay = 10 * time.Second
		out, _ := cmd.CombinedOutput() // exits non-zero on warnings too
		t.Logf("lintian:\n%s", out)
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "E: ") {
				t.Errorf("lintian error: %s", line)
			}
		}
		if !strings.Contains(string(out), "pvans") && len(strings.TrimSpace(string(out))) > 0 && !strings.Contains(string(out), "root privileges") {
			t.Errorf("unexpected lintian output: %s", out)
		}
	})
	t.Run("rpm", func(t *testing.T) {
		r := need(t, "rpm", "rpm")
		meta := runTool(t, dist, nil, r, "-qp", "--queryformat", "%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{LICENSE}", rpm)
		if want := "pvans " + version + " 1 x86_64 BSD-3-Clause"; strings.TrimSpace(meta) != want {
			t.Errorf("rpm metadata %q, want %q", meta, want)
		}
		files := strings.Fields(runTool(t, dist, nil, r, "-qlp", rpm))
		for _, f := range append(want, "/usr/share/zsh/site-functions/_pvans", "/usr/share/licenses/pvans/LICENSE") {
			if !slices.Contains(files, f) {
				t.Errorf("the .rpm does not install %s", f)
			}
		}
		readme := runToolStdin(t, strings.NewReader(""), "sh", "-c", "rpm2cpio "+rpm+" | cpio -i --quiet --to-stdout ./usr/share/doc/pvans/README.md")
		for _, l := range readmeLinks(readme) {
			if p := path.Clean("/usr/share/doc/pvans/" + l); !slices.Contains(files, p) {
				t.Errorf("the .rpm's README links %s (%s), which it does not install", l, p)
			}
		}
		if req := runTool(t, dist, nil, r, "-qp", "--requires", rpm); !strings.Contains(req, "/usr/bin/kill") {
			t.Errorf("the .rpm does not require /usr/bin/kill (ExecReload):\n%s", req)
		}
		// The package owns the directories it makes, so removing it
		// leaves none behind.
		dirs := runTool(t, dist, nil, r, "-qp", "--queryformat", "[%{FILEMODES:perms} %{FILENAMES}\n]", rpm)
		for _, d := range []string{"/etc/pvans", "/usr/share/doc/pvans", "/usr/share/doc/pvans/examples", "/usr/share/licenses/pvans"} {
			if !regexp.MustCompile(`(?m)^d\S* ` + regexp.QuoteMeta(d) + `$`).MatchString(dirs) {
				t.Errorf("the .rpm does not own %s:\n%s", d, dirs)
			}
		}
		if conf := strings.TrimSpace(runTool(t, dist, nil, r, "-qcp", rpm)); conf != "/etc/pvans/pvans.yaml" {
			t.Errorf("rpm config files %q", conf)
		}
		if lic := strings.TrimSpace(runTool(t, dist, nil, r, "-qLp", rpm)); lic != "/usr/share/licenses/pvans/LICENSE" {
			t.Errorf("rpm licence files %q", lic)
		}
		scripts := runTool(t, dist, nil, r, "-qp", "--scripts", rpm)
		if regexp.MustCompile(`(?m)^[^#]*systemctl[^\n]*\b(start|enable|restart)\b`).MatchString(scripts) {
			t.Errorf("an rpm script starts or enables the service:\n%s", scripts)
		}
	})
	t.Run("unit", func(t *testing.T) {
		unit, err := os.ReadFile(filepath.Join(debRoot, "usr/lib/systemd/system/pvans.service"))
		if err != nil {
			t.Skip("no unpacked .deb")
		}
		// Documentation= names installed files and pages.
		var docs []string
		for _, l := range strings.Split(string(unit), "\n") {
			if v, ok := strings.CutPrefix(l, "Documentation="); ok {
				docs = append(docs, strings.Fields(v)...)
			}
		}
		for _, d := range docs {
			switch {
			case strings.HasPrefix(d, "file://"):
				if _, err := os.Stat(filepath.Join(debRoot, strings.TrimPrefix(d, "file://"))); err != nil {
					t.Errorf("Documentation=%s is not in the package", d)
				}
			case strings.HasPrefix(d, "man:"):
				page := regexp.MustCompile(`^man:([^(]+)\((\d)\)$`).FindStringSubmatch(d)
				if page == nil {
					t.Errorf("Documentation=%s: not man:NAME(N)", d)
				} else if _, err := os.Stat(filepath.Join(debRoot, "usr/share/man/man"+page[2], page[1]+"."+page[2]+".gz")); err != nil {
					t.Errorf("Documentation=%s is not in the package", d)
				}
			default:
				t.Errorf("Documentation=%s: neither a file nor a page", d)
			}
		}
		if len(docs) == 0 {
			t.Error("the unit has no Documentation=")
		}
		sa := need(t, "systemd-analyze", "systemd")
		// verify needs ExecStart's binary: the packaged one, at its
		// unpacked path.
		text := strings.Replace(string(unit), "ExecStart=/usr/bin/pvans ", "ExecStart="+filepath.Join(debRoot, "usr/bin/pvans")+" ", 1)
		p := filepath.Join(t.TempDir(), "pvans.service")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		// verify runs man for each man: Documentation=; the pages are the
		// packaged ones.
		cmd := exec.Command(sa, "verify", p)
		cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0", "SYSTEMD_PAGER=", "MANPATH="+filepath.Join(debRoot, "usr/share/man"))
		cmd.WaitDelay = 10 * time.Second
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), "pvans.service") {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	})
	t.Run("man", func(t *testing.T) {
		m := need(t, "man", "man-db")
		for page, want := range map[string][]string{
			"usr/share/man/man1/pvans.1.gz":      {"PVAccess name server", "check-config", "SETTING FLAGS", "EPICS_PVA_ADDR_LIST"},
			"usr/share/man/man5/pvans.yaml.5.gz": {"pva.server_port", "snapshot.path", "Needs a restart"},
		} {
			p := filepath.Join(debRoot, page)
			if _, err := os.Stat(p); err != nil {
				t.Skip("no unpacked .deb")
			}
			cmd := exec.Command(m, "--warnings", "-l", p)
			cmd.Env = append(os.Environ(), "MANPAGER=cat", "PAGER=cat", "MANWIDTH=100", "LANG=C.UTF-8")
			cmd.WaitDelay = 10 * time.Second
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil || stderr.Len() > 0 {
				t.Errorf("man -l %s: %v\n%s", page, err, stderr.String())
			}
			text := strings.ReplaceAll(string(out), "\u2010", "-") // groff may print hyphens as U+2010
			for _, w := range want {
				if !strings.Contains(text, w) {
					t.Errorf("%s renders without %q", page, w)
				}
			}
		}
	})
	t.Run("completion", func(t *testing.T) {
		bash := need(t, "bash", "bash")
		script := filepath.Join(debRoot, "usr/share/bash-completion/completions/pvans")
		if _, err := os.Stat(script); err != nil {
			t.Skip("no unpacked .deb")
		}
		complete := func(words ...string) []string {
			cmd := exec.Command(bash, "--norc", "--noprofile", "-c", `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _pvans; printf '%s\n' "${COMPREPLY[@]}"`, "x", script)
			cmd.Args = append(cmd.Args, words...)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("bash completion of %q: %v", words, err)
			}
			return strings.Fields(string(out))
		}
		if got := complete("pvans", "che"); !slices.Equal(got, []string{"check-config"}) {
			t.Errorf("pvans che<TAB> = %q", got)
		}
		if got := complete("pvans", "run", "--server-p"); !slices.Equal(got, []string{"--server-port"}) {
			t.Errorf("pvans run --server-p<TAB> = %q", got)
		}
		if got := complete("pvans", "query", "--t"); !slices.Equal(got, []string{"--timeout"}) {
			t.Errorf("pvans query --t<TAB> = %q", got)
		}
		if zsh, err := exec.LookPath("zsh"); err == nil {
			runTool(t, "", nil, zsh, "-n", filepath.Join(debRoot, "usr/share/zsh/vendor-completions/_pvans"))
		} else {
			t.Log("zsh not installed: the zsh script's syntax is not checked")
		}
	})
	t.Run("tarball", func(t *testing.T) {
		f, err := os.Open(tgz)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		out := runToolStdin(t, zr, "tar", "-t")
		top := "pvans-" + version + "-linux-amd64/"
		for _, f := range []string{"pvans", "LICENSE", "CHANGELOG.md", "configs/pvans.yaml", "deploy/systemd/pvans.service",
			"docs/operations.md", "docs/upgrading.md", "deploy/prometheus/alerts.yml", "deploy/grafana/pvans.json",
			"configs/reach/gateway-host.yaml", "configs/web-config.yml", "man/man1/pvans.1", "man/man5/pvans.yaml.5", "completions/pvans.bash", "completions/_pvans"} {
			if !strings.Contains(out, top+f+"\n") {
				t.Errorf("the tarball has no %s", top+f)
			}
		}
	})
}

func runToolStdin(t *testing.T, in io.Reader, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = in
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	return string(out)
}

// checkBinary: the packaged binary is static and says the release's version,
// the commit it was built from and the commit's date.
func checkBinary(t *testing.T, bin, version string) {
	t.Helper()
	out := runTool(t, "", nil, bin, "version")
	sc := bufio.NewScanner(strings.NewReader(out))
	lines := map[string]string{}
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		lines[k] = strings.TrimSpace(v)
	}
	if lines["pvans"] != version {
		t.Errorf("pvans version says %q, want %s:\n%s", lines["pvans"], version, out)
	}
	if !regexp.MustCompile(`^[0-9a-f]{40}(-dirty)?$`).MatchString(lines["commit"]) {
		t.Errorf("commit %q", lines["commit"])
	}
	if _, err := time.Parse(time.RFC3339, lines["date"]); err != nil {
		t.Errorf("date %q: %v", lines["date"], err)
	}
	if f, err := exec.LookPath("file"); err == nil {
		if o := runTool(t, "", nil, f, bin); !strings.Contains(o, "statically linked") {
			t.Errorf("not static: %s", o)
		}
	}
}

func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			out = append(out, strings.TrimPrefix(p, root))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A release is the commit its tag names: release.sh refuses to label a
// commit that is not tagged vVERSION, even from a clean tree.
func TestReleaseRefusesAnUntaggedCommit(t *testing.T) {
	git := need(t, "git", "git")
	root := repoRoot(t)
	version := changelogVersion(t, root)
	clone := filepath.Join(t.TempDir(), "clone")
	runTool(t, "", nil, git, "clone", "-q", "--no-tags", root, clone)
	cmd := exec.Command(filepath.Join(clone, "scripts/release.sh"), version)
	cmd.Dir = clone
	cmd.Env = append(os.Environ(), "ARCHES=amd64", "DIST="+t.TempDir())
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not the commit tagged v"+version) {
		t.Fatalf("release.sh %s of an untagged commit: %v\n%s", version, err, out)
	}
	// Tagged, the same clean clone passes that check (the build itself is
	// TestRelease's): the refusal is about the tag, not the tree.
	runTool(t, clone, []string{"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t"},
		git, "tag", "-a", "-m", "test", "v"+version)
	// The script up to its checks, run from scripts/ as the script is.
	cmd = exec.Command("bash", "-c", `sed -n '1,/^export SOURCE_DATE_EPOCH/p' scripts/release.sh >scripts/checks.sh && bash scripts/checks.sh "$0"`, version)
	cmd.Dir = clone
	cmd.WaitDelay = 10 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release.sh's checks of the commit tagged v%s: %v\n%s", version, err, out)
	}
}

// readmeLinks is the relative link targets of a README, without anchors.
func readmeLinks(readme string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`\]\(([^)#:\s]+)(#[^)]*)?\)`).FindAllStringSubmatch(readme, -1) {
		out = append(out, m[1])
	}
	return out
}
