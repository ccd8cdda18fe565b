package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/daemon"
	"github.com/pvans-project/pvans/internal/logging"
	"github.com/pvans-project/pvans/internal/sim"
)

// cmdDemo runs pvans on loopback with safe settings next to a simulated
// site, waits until pvans has learned every name, shows how to query it
// and runs until interrupted. Nothing leaves 127.0.0.1, whatever the
// environment says: the EPICS_* variables are ignored here.
//
// The site is controlled while it runs, by commands typed on the terminal
// (help lists them) or given with --do for scripted use, and the demo
// narrates what pvans did in response, from its event log.
//
// The simulator (internal/sim) is linked into the production binary on
// purpose: `go run ./cmd/pvans demo` is the first command of the README
// and must work without a second binary or a build tag. It costs about
// the size of its code; nothing of it runs unless `demo` is asked for.
func cmdDemo(args []string, stdout, stderr io.Writer) int {
	return demo(args, os.Stdin, stdout, stderr, nil)
}

// demo is cmdDemo with its input and stop signal injectable (tests).
func demo(args []string, stdin io.Reader, stdout, stderr io.Writer, stop <-chan struct{}) int {
	fs := flag.NewFlagSet("pvans demo", flag.ContinueOnError)
	servers := fs.Int("servers", 3, "simulated servers")
	names := fs.Int("names", 100, "names per simulated server")
	tcpPort := fs.Uint("server-port", 5075, "pvans TCP name-server port")
	udpPort := fs.Uint("broadcast-port", 5076, "pvans UDP search port")
	httpListen := fs.String("http-listen", "127.0.0.1:9076", "HTTP API and metrics address (loopback)")
	logLevel := fs.String("log-level", "info", "log level")
	wait := fs.Duration("wait", 30*time.Second, "give up if the registry is not full after this long")
	echo := fs.Duration("echo", 0, "pvans' watch-connection echo interval, 1s to 15s (0: the default, 15 s); a killed server leaves after echo + min(echo, 10 s). Sets pva.conn_tmo to twice it: pvans echoes as a PVXS client does")
	var script []sim.Timed
	fs.Func("do", `run a site command this long after the site is ready, e.g. --do "10s restart 1" (repeatable; "help" lists commands)`, func(v string) error {
		c, err := sim.ParseTimed(v)
		script = append(script, c)
		return err
	})
	if err := parseFlags(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *servers < 1 || *names < 1 || *tcpPort == 0 || *tcpPort > 65535 || *udpPort == 0 || *udpPort > 65535 {
		fmt.Fprintln(stderr, "pvans demo: --servers and --names must be positive, ports 1-65535")
		return 2
	}
	cfg := config.Loopback(uint16(*tcpPort), uint16(*udpPort))
	cfg.HTTP.Listen = *httpListen
	cfg.Search.Through = true
	cfg.Log.Level = *logLevel
	if *echo > 0 {
		// PVXS's client echo is 3/8 of tcpTimeout (4/3 × conn_tmo): half of
		// conn_tmo (config.PVA.EchoInterval).
		cfg.PVA.ConnTmo = 2 * echo.Seconds()
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "pvans demo: configuration refused:\n"+err.Error())
		return 1
	}
	log, _, err := logging.NewTo(stderr, cfg.Log.Level, "console")
	if err != nil {
		fmt.Fprintln(stderr, "pvans demo:", err)
		return 1
	}
	defer func() { _ = log.Sync() }()

	d, err := daemon.New(&cfg, daemon.Options{Logger: log})
	if err != nil {
		fmt.Fprintln(stderr, "pvans demo:", err)
		return 1
	}
	if err := d.Start(); err != nil {
		fmt.Fprintln(stderr, "pvans demo: cannot start pvans:", err)
		return 1
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		_ = d.Shutdown(ctx)
	}()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	site, err := sim.Start(ctx, sim.Options{
		Servers:        *servers,
		NamesPerServer: *names,
		Host:           netip.MustParseAddr("127.0.0.1"),
		BeaconDests:    []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(*udpPort))},
		Logf:           log.Sugar().Infof, // the simulator's lines begin "sim: " already
	})
	if err != nil {
		fmt.Fprintln(stderr, "pvans demo: cannot start the simulated site:", err)
		return 1
	}
	defer site.Close()

	want := *servers * *names
	deadline := time.Now().Add(*wait)
	for d.Registry.Counts().Names < want {
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "pvans demo: registry holds %d of %d names after %s\n", d.Registry.Counts().Names, want, *wait)
			return 1
		}
		time.Sleep(50 * time.Millisecond)
	}
	c := d.Registry.Counts()
	log.Info("registry full", zap.Int("servers", c.Servers), zap.Int("names", c.Names))

	tcp := fmt.Sprintf("127.0.0.1:%d", *tcpPort)
	fmt.Fprintf(stdout, "\npvans demo: pvans learned %d servers and %d names from a simulated site.\n\n", c.Servers, c.Names)
	for _, s := range site.Servers() {
		fmt.Fprintf(stdout, "  server %d  %-21s GUID %s  %d names (%s … %s)\n", s.Index, s.TCP, s.GUID, len(s.Names), s.Names[0], s.Names[len(s.Names)-1])
	}
	first := site.Server(0).Names[0]
	// The tools' beacon listener goes to another port than pvans': the
	// kernel gives each unicast beacon to one socket of those sharing it.
	env := fmt.Sprintf("EPICS_PVA_NAME_SERVERS=%s EPICS_PVA_AUTO_ADDR_LIST=NO EPICS_PVA_ADDR_LIST= EPICS_PVA_BROADCAST_PORT=%d", tcp, *udpPort+1)
	fmt.Fprintf(stdout, `
Try, in another terminal (every value counts up once a second):
  %[5]s query --server %[1]s %[2]s          resolve a name through pvans over TCP
  %[5]s list --api http://%[3]s --servers   what pvans knows
  curl http://%[3]s/v1/names/%[2]s          the HTTP API; status page at http://%[3]s/
  export %[4]s
  pvxget %[2]s; pvxinfo %[2]s; pvxput %[2]s 42; pvxmonitor %[2]s
                                            a real PVXS client, if you have one
Type commands here (help lists them), e.g. "restart 1" or "kill 2", and watch pvans react.
Press Ctrl-C to stop.
`, tcp, first, d.HTTPAddr(), env, selfCommand())

	n := newNarrator(site, stdout)
	done := make(chan struct{})
	defer close(done)
	go n.follow(d.Events, done)
	quit := make(chan struct{}, 1)
	go func() {
		// Started in the background (`pvans demo &`), a read of the
		// terminal would stop the demo; read once it is brought to the
		// foreground.
		if f, ok := stdin.(*os.File); ok && !waitForeground(func() bool { return inBackground(f) }, 500*time.Millisecond, done) {
			return
		}
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "quit" || line == "exit" {
				quit <- struct{}{}
				return
			}
			n.exec(line)
		}
		// End of input (a pipe, /dev/null): keep running until a signal.
	}()
	for _, tc := range script {
		t := time.AfterFunc(tc.After, func() { n.exec(tc.Command) })
		defer t.Stop()
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	select {
	case <-sigs:
	case <-quit:
	case <-stop:
	}
	fmt.Fprintln(stdout, "pvans demo: stopping")
	return 0
}
