package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
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
func cmdDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pvans demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	servers := fs.Int("servers", 3, "simulated servers")
	names := fs.Int("names", 100, "names per simulated server")
	tcpPort := fs.Uint("server-port", 5075, "pvans TCP name-server port")
	udpPort := fs.Uint("broadcast-port", 5076, "pvans UDP search port")
	httpListen := fs.String("http-listen", "127.0.0.1:9076", "HTTP API and metrics address (loopback)")
	logLevel := fs.String("log-level", "info", "log level")
	wait := fs.Duration("wait", 30*time.Second, "give up if the registry is not full after this long")
	if err := fs.Parse(args); err != nil {
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
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "pvans demo: configuration refused:\n"+err.Error())
		return 1
	}
	log, _, err := logging.New(cfg.Log.Level, "console")
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
		Logf:           func(f string, a ...any) { log.Sugar().Infof("sim: "+f, a...) },
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
	fmt.Fprintf(stdout, `
Try, in another terminal:
  pvans query --server %[1]s %[2]s          resolve a name through pvans over TCP
  pvans list --api http://%[3]s --servers   what pvans knows
  curl http://%[3]s/v1/names/%[2]s          the HTTP API; status page at http://%[3]s/
  EPICS_PVA_NAME_SERVERS=%[1]s EPICS_PVA_AUTO_ADDR_LIST=NO EPICS_PVA_ADDR_LIST= pvxget %[2]s
                                            a real PVXS client, if you have one
Press Ctrl-C to stop.
`, tcp, first, d.HTTPAddr())

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	<-sigs
	fmt.Fprintln(stdout, "pvans demo: stopping")
	return 0
}
