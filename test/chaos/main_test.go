//go:build linux

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// simEnv carries a simSpec to a re-executed test binary, which then runs
// simulated IOCs instead of tests (see TestMain). A separate process can
// be killed with SIGKILL like a real IOC; the spec's prefix keeps the
// names of several such processes apart (pvans-sim's names are all
// sim:s<i>:pv<j>).
const simEnv = "PVANS_CHAOS_SIM"

type simSpec struct {
	Host           netip.Addr
	Prefix         string
	Servers, Names int
	TCPPort        uint16 // server i on TCPPort+i
	UDPPort        uint16 // fan-out socket (search-through destination)
	Beacon         netip.AddrPort
	BeaconInterval time.Duration
}

func (s simSpec) names(i int) []string {
	out := make([]string, s.Names)
	for j := range out {
		out[j] = s.Prefix + ":s" + strconv.Itoa(i) + ":pv" + strconv.Itoa(j)
	}
	return out
}

func (s simSpec) allNames() []string {
	var out []string
	for i := 0; i < s.Servers; i++ {
		out = append(out, s.names(i)...)
	}
	return out
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(simEnv); spec != "" {
		os.Exit(runSimHelper(spec))
	}
	if os.Geteuid() == 0 {
		testutil.CleanStaleNetns(staleNetns)
	}
	code := m.Run()
	testutil.RemoveBuilds()
	os.Exit(code)
}

// runSimHelper runs the site until SIGTERM or SIGKILL; it prints one
// "server I GUID ENDPOINT" line per server, then "ready".
func runSimHelper(js string) int {
	var s simSpec
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		fmt.Fprintln(os.Stderr, "sim helper:", err)
		return 2
	}
	o := sim.Options{Servers: s.Servers, Host: s.Host, TCPPort: s.TCPPort, UDPPort: s.UDPPort, BeaconInterval: s.BeaconInterval,
		Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000 ")+f+"\n", a...) }}
	for i := 0; i < s.Servers; i++ {
		o.Names = append(o.Names, s.names(i))
	}
	if s.Beacon.IsValid() {
		o.BeaconDests = []netip.AddrPort{s.Beacon}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	site, err := sim.Start(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sim helper:", err)
		return 1
	}
	defer site.Close()
	for _, sv := range site.Servers() {
		fmt.Printf("server %d %s %s\n", sv.Index, sv.GUID, sv.TCP)
	}
	fmt.Println("ready")
	<-ctx.Done()
	return 0
}

// simProc is a running sim helper process.
type simProc struct {
	*testutil.Proc
	spec  simSpec
	guids []string
	tcp   []string
}

// startSim runs a sim helper in the server net and waits until it serves.
func (tp *topo) startSim(t *testing.T, what string, spec simSpec) *simProc {
	t.Helper()
	js, _ := json.Marshal(spec)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := startIn(t, tp.s, what, []string{simEnv + "=" + string(js)}, exe)
	sp := &simProc{Proc: p, spec: spec, guids: make([]string, spec.Servers), tcp: make([]string, spec.Servers)}
	deadline := time.After(15 * time.Second)
	for {
		select {
		case l := <-p.Lines:
			if l == "ready" {
				return sp
			}
			f := strings.Fields(l)
			if len(f) == 4 && f[0] == "server" {
				i, _ := strconv.Atoi(f[1])
				if i >= 0 && i < spec.Servers {
					sp.guids[i], sp.tcp[i] = f[2], f[3]
				}
			}
		case <-p.Done():
			t.Fatalf("%s exited at start:\n%s", what, p.Output())
		case <-deadline:
			t.Fatalf("%s not ready in 15 s:\n%s", what, p.Output())
		}
	}
}

// guidOf is the GUID of the server holding name.
func (sp *simProc) guidOf(name string) string {
	for i := 0; i < sp.spec.Servers; i++ {
		if strings.HasPrefix(name, sp.spec.Prefix+":s"+strconv.Itoa(i)+":") {
			return sp.guids[i]
		}
	}
	return ""
}
