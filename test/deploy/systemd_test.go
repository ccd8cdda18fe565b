package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const unitPath = "deploy/systemd/pvans.service"

// unitFile is a parsed unit: section -> key -> values in order (a key may
// repeat, and an empty assignment resets it, as systemd does).
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, text string) unitFile {
	t.Helper()
	u := unitFile{}
	sec := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			sec = line[1 : len(line)-1]
			u[sec] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || sec == "" || strings.HasSuffix(line, "\\") {
				t.Fatalf("%s:%d: cannot parse %q", unitPath, n, line)
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if v == "" {
				u[sec][k] = []string{""}
			} else {
				u[sec][k] = append(u[sec][k], v)
			}
		}
	}
	return u
}

func (u unitFile) last(sec, key string) (string, bool) {
	v := u[sec][key]
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// TestSystemdUnitSettings checks the settings the daemon relies on and the
// sandbox the deployment promises, and that the unit's paths agree with
// configs/pvans.yaml.
func TestSystemdUnitSettings(t *testing.T) {
	u := parseUnit(t, readRepoFile(t, unitPath))
	want := map[string]string{
		"Type":                    "notify", // READY=1 after the sockets are bound
		"ExecReload":              "/bin/kill -HUP $MAINPID",
		"DynamicUser":             "yes",
		"CapabilityBoundingSet":   "",
		"AmbientCapabilities":     "",
		"NoNewPrivileges":         "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"ProtectKernelTunables":   "yes",
		"ProtectControlGroups":    "yes",
		"LockPersonality":         "yes",
		"MemoryDenyWriteExecute":  "yes",
		"SystemCallArchitectures": "native",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX AF_NETLINK",
		"StateDirectory":          "pvans",
		"ConfigurationDirectory":  "pvans",
		"EnvironmentFile":         "-/etc/default/pvans",
		"Restart":                 "on-failure",
		"WatchdogSec":             "30",
		"TimeoutStopSec":          "20",
		"LimitNOFILE":             "65536",
	}
	for k, v := range want {
		if got, ok := u.last("Service", k); !ok || got != v {
			t.Errorf("[Service] %s = %q (set: %v), want %q", k, got, ok, v)
		}
	}
	if got := u["Service"]["SystemCallFilter"]; len(got) == 0 || got[0] != "@system-service" {
		t.Errorf("SystemCallFilter = %v, want @system-service first", got)
	}
	if got, _ := u.last("Install", "WantedBy"); got != "multi-user.target" {
		t.Errorf("[Install] WantedBy = %q", got)
	}

	// ExecStart: the binary and the config file under ConfigurationDirectory.
	exec, _ := u.last("Service", "ExecStart")
	f := strings.Fields(exec)
	if len(f) < 4 || f[0] != "/usr/bin/pvans" || f[1] != "run" {
		t.Fatalf("ExecStart = %q, want /usr/bin/pvans run --config FILE", exec)
	}
	cfg := ""
	for i := 2; i+1 < len(f); i++ {
		if f[i] == "--config" {
			cfg = f[i+1]
		}
	}
	if cfgDir, _ := u.last("Service", "ConfigurationDirectory"); path.Dir(cfg) != "/etc/"+cfgDir {
		t.Errorf("ExecStart reads %q, outside ConfigurationDirectory /etc/%s", cfg, cfgDir)
	}
	// The snapshot must be in the only writable place: StateDirectory.
	c := productionConfig(t)
	if st, _ := u.last("Service", "StateDirectory"); path.Dir(c.Snapshot.Path) != "/var/lib/"+st {
		t.Errorf("configs/pvans.yaml snapshot.path %q is not in StateDirectory /var/lib/%s (ProtectSystem=strict makes everything else read-only)", c.Snapshot.Path, st)
	}
	// Ports below 1024 need a capability the unit does not grant.
	for _, p := range []uint16{c.PVA.ServerPort, c.PVA.BroadcastPort} {
		if p < 1024 {
			t.Errorf("configs/pvans.yaml uses port %d, which needs CAP_NET_BIND_SERVICE", p)
		}
	}
}

// verifyableUnit writes the unit to a temporary directory with ExecStart's
// binary replaced by one that exists here (this test binary):
// systemd-analyze verify refuses a unit whose ExecStart is not executable,
// and /usr/bin/pvans is not installed on a build machine.
func verifyableUnit(t *testing.T, edit func(string) string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(readRepoFile(t, unitPath), "ExecStart=/usr/bin/pvans ", "ExecStart="+self+" ", 1)
	if !strings.Contains(text, "ExecStart="+self) {
		t.Fatal("ExecStart=/usr/bin/pvans not found")
	}
	// systemd-analyze verify runs man for each man: page the unit names;
	// the pages are generated when packaging, so test/release verifies
	// the unit with them.
	text = regexp.MustCompile(`(?m)^Documentation=man:.*\n`).ReplaceAllString(text, "")
	if edit != nil {
		text = edit(text)
	}
	p := filepath.Join(t.TempDir(), "pvans.service")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func systemdAnalyze(t *testing.T) string {
	t.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian package systemd)")
	}
	return sa
}

// analyze runs systemd-analyze verify and returns its complaints about the
// unit. systemd-analyze exits 0 on unknown keys and unparsable values and
// only prints warnings, so any line naming the unit counts.
func analyze(t *testing.T, sa, unit string) (complaints []string, err error) {
	t.Helper()
	cmd := exec.Command(sa, "verify", unit)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0", "SYSTEMD_PAGER=")
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(l, "pvans.service") {
			complaints = append(complaints, l)
		} else if l != "" {
			t.Logf("systemd-analyze (not about the unit): %s", l)
		}
	}
	return complaints, err
}

func TestSystemdAnalyzeVerify(t *testing.T) {
	sa := systemdAnalyze(t)
	// A broken copy first, so a systemd-analyze that checks nothing here
	// (no systemd, wrong version) cannot pass the real unit by default.
	bad := verifyableUnit(t, func(s string) string {
		return strings.Replace(s, "WatchdogSec=30", "WatchdogSec=thirty", 1)
	})
	if c, err := analyze(t, sa, bad); len(c) == 0 && err == nil {
		t.Skip("systemd-analyze verify does not report a bad value here; cannot check the unit")
	}
	c, err := analyze(t, sa, verifyableUnit(t, nil))
	if err != nil || len(c) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unitPath, err, strings.Join(c, "\n"))
	}
}

// TestSystemdSecurityExposure keeps the sandbox from eroding: systemd's
// own exposure score (0 best, 10 worst) must stay "OK" (at most 2.0).
func TestSystemdSecurityExposure(t *testing.T) {
	sa := systemdAnalyze(t)
	unit := verifyableUnit(t, nil)
	cmd := exec.Command(sa, "security", "--offline=yes", "--threshold=20", "--no-pager", unit)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0", "SYSTEMD_COLORS=0")
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "unrecognized option") {
		t.Skip("systemd-analyze security has no --offline (systemd < 250)")
	}
	if err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.0 or error: %v\n%s", err, out)
	}
	var score string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "Overall exposure level") {
			score = l
		}
	}
	if score == "" {
		t.Errorf("no exposure level in systemd-analyze security output:\n%s", out)
	}
	t.Log(strings.TrimSpace(score))
}
