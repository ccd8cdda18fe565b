package deploy

import (
	"encoding/json"
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
)

type dockerInstr struct {
	Line int
	Op   string // upper case
	Args string
}

type dockerStage struct {
	From, Name string
	Instrs     []dockerInstr
}

// parseDockerfile splits a Dockerfile into stages of instructions, joining
// continuation lines and dropping comments. Enough for structure checks;
// Docker is not available to build it here.
func parseDockerfile(t *testing.T, text string) (stages []*dockerStage) {
	t.Helper()
	var cur strings.Builder
	start := 0
	flush := func() {
		s := strings.TrimSpace(cur.String())
		cur.Reset()
		if s == "" {
			return
		}
		op, args, _ := strings.Cut(s, " ")
		in := dockerInstr{Line: start, Op: strings.ToUpper(op), Args: strings.TrimSpace(args)}
		if in.Op == "FROM" {
			f := strings.Fields(in.Args)
			st := &dockerStage{From: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.Name = f[2]
			}
			stages = append(stages, st)
			return
		}
		if len(stages) == 0 {
			if in.Op != "ARG" {
				t.Errorf("Dockerfile:%d: %s before the first FROM", in.Line, in.Op)
			}
			return
		}
		st := stages[len(stages)-1]
		st.Instrs = append(st.Instrs, in)
	}
	for i, line := range strings.Split(text, "\n") {
		trim := strings.TrimSpace(line)
		if strings.HasPrefix(trim, "#") {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if s, ok := strings.CutSuffix(trim, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trim)
		flush()
	}
	flush()
	return stages
}

func (s *dockerStage) all(op string) []dockerInstr {
	var out []dockerInstr
	for _, in := range s.Instrs {
		if in.Op == op {
			out = append(out, in)
		}
	}
	return out
}

// execForm parses a JSON-array (exec form) argument list.
func execForm(t *testing.T, in dockerInstr) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(in.Args), &v); err != nil || len(v) == 0 {
		t.Errorf("Dockerfile:%d: %s %s: want exec form [\"...\"]: %v", in.Line, in.Op, in.Args, err)
	}
	return v
}

// copyDest maps destinations of COPY in a stage to the instruction's
// flags and sources.
type dockerCopy struct {
	From, Chown string
	Srcs        []string
}

func copies(s *dockerStage) map[string]dockerCopy {
	out := map[string]dockerCopy{}
	for _, in := range s.all("COPY") {
		var c dockerCopy
		f := strings.Fields(in.Args)
		for len(f) > 0 && strings.HasPrefix(f[0], "--") {
			k, v, _ := strings.Cut(strings.TrimPrefix(f[0], "--"), "=")
			switch k {
			case "from":
				c.From = v
			case "chown":
				c.Chown = v
			}
			f = f[1:]
		}
		if len(f) >= 2 {
			c.Srcs = f[:len(f)-1]
			out[f[len(f)-1]] = c
		}
	}
	return out
}

// TestDockerfileStructure checks the image is built in a Go stage as a
// static binary, runs as non-root on a minimal base, and that its ports,
// health check, config and state directory agree with configs/pvans.yaml.
func TestDockerfileStructure(t *testing.T) {
	stages := parseDockerfile(t, readRepoFile(t, "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build, got %d stage(s)", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	if !strings.HasPrefix(build.From, "golang:") || build.Name == "" {
		t.Errorf("first stage FROM %s AS %q: want a named golang stage", build.From, build.Name)
	}
	if !strings.HasPrefix(final.From, "gcr.io/distroless/static") && final.From != "scratch" {
		t.Errorf("final stage FROM %s: want distroless/static or scratch (a static binary needs no libc)", final.From)
	}
	built := false
	for _, in := range build.all("RUN") {
		if strings.Contains(in.Args, "go build") && strings.Contains(in.Args, "./cmd/pvans") {
			built = true
			if !strings.Contains(in.Args, "CGO_ENABLED=0") {
				t.Errorf("Dockerfile:%d: go build without CGO_ENABLED=0 links libc, absent from the runtime image", in.Line)
			}
		}
	}
	if !built {
		t.Error("the build stage does not go build ./cmd/pvans")
	}

	cp := copies(final)
	bin := ""
	for dst, c := range cp {
		if c.From == build.Name && path.Base(dst) == "pvans" && len(c.Srcs) == 1 && path.Base(c.Srcs[0]) == "pvans" {
			bin = dst
		}
	}
	if bin == "" {
		t.Fatal("the final stage copies no pvans binary from the build stage")
	}

	users := final.all("USER")
	if len(users) == 0 {
		t.Fatal("the final stage has no USER: it would run as root")
	}
	user := users[len(users)-1].Args
	if uid, _, _ := strings.Cut(user, ":"); uid == "root" || uid == "0" {
		t.Errorf("USER %s: want a non-root user", user)
	}

	c := productionConfig(t)
	_, httpPort, err := net.SplitHostPort(c.HTTP.Listen)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{strconv.Itoa(int(c.PVA.ServerPort)) + "/tcp", strconv.Itoa(int(c.PVA.BroadcastPort)) + "/udp", httpPort + "/tcp"}
	var exposed []string
	for _, in := range final.all("EXPOSE") {
		exposed = append(exposed, strings.Fields(in.Args)...)
	}
	slices.Sort(want)
	slices.Sort(exposed)
	if !slices.Equal(exposed, want) {
		t.Errorf("EXPOSE %v, want %v (configs/pvans.yaml ports)", exposed, want)
	}

	// HEALTHCHECK [options] CMD ["/usr/local/bin/pvans", "healthz", URL]
	hcs := final.all("HEALTHCHECK")
	if len(hcs) != 1 {
		t.Fatalf("want one HEALTHCHECK, got %d", len(hcs))
	}
	_, hcArgs, ok := strings.Cut(hcs[0].Args, "CMD ")
	if !ok {
		t.Fatalf("HEALTHCHECK %s: no CMD", hcs[0].Args)
	}
	hc := execForm(t, dockerInstr{Line: hcs[0].Line, Op: "HEALTHCHECK CMD", Args: strings.TrimSpace(hcArgs)})
	if len(hc) != 3 || hc[0] != bin || hc[1] != "healthz" {
		t.Errorf("HEALTHCHECK CMD %q, want [%q healthz URL] (distroless has no shell or curl)", hc, bin)
	} else if u, err := url.Parse(hc[2]); err != nil || u.Port() != httpPort || u.Path != "/healthz" {
		t.Errorf("HEALTHCHECK URL %q: want /healthz on http.listen's port %s", hc[2], httpPort)
	}

	// ENTRYPOINT + CMD run the daemon with the config the image carries.
	var argv []string
	for _, op := range []string{"ENTRYPOINT", "CMD"} {
		if in := final.all(op); len(in) > 0 {
			argv = append(argv, execForm(t, in[len(in)-1])...)
		}
	}
	if len(argv) < 4 || argv[0] != bin || argv[1] != "run" || argv[2] != "--config" {
		t.Fatalf("ENTRYPOINT+CMD = %q, want [%s run --config FILE]", argv, bin)
	}
	if cfg, ok := cp[argv[3]]; !ok || !slices.Equal(cfg.Srcs, []string{"configs/pvans.yaml"}) {
		t.Errorf("the image runs with --config %s, which is not a COPY of configs/pvans.yaml", argv[3])
	}

	// The snapshot directory must be writable by USER.
	stateDir := path.Dir(c.Snapshot.Path)
	if st, ok := cp[stateDir]; !ok || st.Chown != user {
		t.Errorf("snapshot directory %s: want a COPY --chown=%s into it (got %+v)", stateDir, user, st)
	}
}

// TestDockerignore keeps the build context small without dropping what
// the build needs.
func TestDockerignore(t *testing.T) {
	var pats []string
	for _, l := range strings.Split(readRepoFile(t, ".dockerignore"), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			pats = append(pats, strings.Trim(l, "/"))
		}
	}
	if !slices.Contains(pats, ".git") {
		t.Error(".dockerignore does not exclude .git")
	}
	for _, need := range []string{"go.mod", "go.sum", "cmd", "cmd/pvans", "internal", "configs", "configs/pvans.yaml"} {
		for _, p := range pats {
			if ok, _ := path.Match(p, need); ok || strings.HasPrefix(need, p+"/") {
				t.Errorf(".dockerignore pattern %q excludes %s, which the build needs", p, need)
			}
		}
	}
}
