package reload

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

var (
	raceOnce sync.Once
	raceBin  string
	raceErr  error
)

// binary is the pvans to run: built with the race detector when this test
// runs under it (go test -race ./test/reload), else the harness's.
func binary(t *testing.T) string {
	t.Helper()
	if !raceEnabled {
		return harness.Binary(t)
	}
	raceOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pvans-race-")
		if err != nil {
			raceErr = err
			return
		}
		raceBin = filepath.Join(dir, "pvans")
		goCmd, err := testutil.GoCommand()
		if err != nil {
			raceErr = err
			return
		}
		if out, err := exec.Command(goCmd, "build", "-race", "-o", raceBin, "github.com/pvans-project/pvans/cmd/pvans").CombinedOutput(); err != nil {
			raceErr = fmt.Errorf("go build -race: %v\n%s", err, out)
		}
	})
	if raceErr != nil {
		t.Fatal(raceErr)
	}
	return raceBin
}

// TestReloadUnderLoadBinary: 100 TCP clients search the real daemon while
// it is sent SIGHUP 20 times, each with another group of settings changed
// (log format and level among them). Under go test -race the daemon is
// built with the race detector and any race it reports fails the test.
func TestReloadUnderLoadBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pvans binary")
	}
	bin := binary(t)
	t.Cleanup(func() {
		if raceBin != "" {
			os.RemoveAll(filepath.Dir(raceBin))
		}
	})
	file := filepath.Join(t.TempDir(), "pvans.yaml")
	if err := os.WriteFile(file, []byte("search:\n  through: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tcp, udp, web := harness.FreePort(t), harness.FreePort(t), harness.FreePort(t)
	cmd := exec.Command(bin, "run", "--config", file, "--interfaces", "127.0.0.1",
		"--server-port", fmt.Sprint(tcp), "--broadcast-port", fmt.Sprint(udp),
		"--auto-addr-list=false", "--auto-beacon-addr-list=false", "--discovery-at-start=false",
		"--http-listen", fmt.Sprintf("127.0.0.1:%d", web), "--snapshot-path", "")
	cmd.Env = testutil.IsolatedEnv()
	p := testutil.StartProc(t, "pvans", cmd)
	testutil.WaitFor(t, 60*time.Second, "started", func() bool { return strings.Contains(p.Output(), "pvans started") })
	d := &daemon{Pvans: &harness.Pvans{Proc: p}, file: file}
	site := startSite(t, sim.Options{Servers: 2, NamesPerServer: 20, BeaconDests: []netip.AddrPort{netip.AddrPortFrom(lo, udp)},
		BeaconInterval: 500 * time.Millisecond})
	ep := netip.AddrPortFrom(lo, tcp)

	stop := testutil.Load(100, 10*time.Millisecond, func(i int) func() bool {
		cl := dial(t, ep)
		names := []string{site.Server(i % 2).Names[i%20], fmt.Sprintf("load:none:%d", i)}
		return func() bool { return cl.Search(names) == nil } // fails once the connection is closed
	})
	groups := []string{
		"access:\n  name_deny: [\"sim:s1:*\"]\n",
		"rate_limit:\n  tcp_messages_per_second: 200\n",
		"rate_limit:\n  exempt: [127.0.0.0/8]\n",
		"search:\n  through: true\n",
		fmt.Sprintf("static:\n  servers: [%s]\n", site.Server(0).TCP),
		fmt.Sprintf("pva:\n  addr_list: [%s]\n", site.UDPAddr()),
		"registry:\n  max_names: 30\ntcp:\n  waiters_total: 1\n",
		"beacon:\n  expiry: 30s\npva:\n  conn_tmo: 6\n",
		"log:\n  level: debug\n  format: console\n",
		"http:\n  allowed_hosts: [.site.example]\nudp:\n  send_beacons: true\n",
	}
	for i := range 20 {
		body := groups[i%len(groups)]
		if !strings.Contains(body, "search:") {
			body = "search:\n  through: false\n" + body
		}
		d.reload(t, body)
	}
	searches := stop()
	t.Logf("%d searches by 100 clients during 20 reloads", searches)
	if searches < 200 {
		t.Fatalf("only %d searches", searches)
	}
	d.reload(t, "search:\n  through: false\n")
	name := site.Server(1).Names[3]
	testutil.WaitFor(t, 15*time.Second, "answered after the reloads", func() bool {
		ans, err := harness.Query(nil, ep, []string{name}, time.Second)
		return err == nil && ans[name].GUID == site.Server(1).GUID
	})
	_ = p.Signal(syscall.SIGTERM)
	code := p.WaitExit(t, 30*time.Second)
	if strings.Contains(p.Output(), "DATA RACE") {
		t.Fatal("the daemon reported a data race (output above)")
	}
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
