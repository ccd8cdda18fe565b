// Command pvans-sim runs simulated PVA servers (package internal/sim)
// until interrupted: N servers × M names on loopback by default, each with
// its own GUID, TCP port and UDP socket, beaconing to the given
// destinations.
//
//	pvans-sim -servers 20 -names 1000 -beacon 127.0.0.1:5076 -names-out names.txt
//
// The names file (one name a line) feeds `pvans-bench -names`.
//
// The site is controlled while it runs: by commands on standard input
// (`help` lists them: restart, kill, revive, stop, start, new, add, remove,
// drop, servers, names) or, for scripts, by -do "DURATION COMMAND" flags
// run that long after the site started, e.g.
//
//	pvans-sim -servers 3 -beacon 127.0.0.1:5076 -do "20s restart 1" -do "40s kill 2"
//
// With -java the servers behave as Phoebus core-pva's Java server (no
// beacons, no `server` PV, negative CIDs taken as pings; sim.Options.Java).
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
	"sync"
	"syscall"
	"time"

	"github.com/pvans-project/pvans/internal/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pvans-sim:", err)
		stop()
		os.Exit(1)
	}
}

// run runs the site until ctx ends; its I/O is injectable for tests.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pvans-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o        sim.Options
		host     = fs.String("host", "127.0.0.1", "listen address of every server")
		beacons  = fs.String("beacon", "", "comma-separated host:port beacon destinations (none: no beacons)")
		namesOut = fs.String("names-out", "", "write every server's names to this file, one a line")
		tcpPort  = fs.Uint("tcp-port", 0, "server i listens on TCP tcp-port+i (0: ephemeral)")
		udpPort  = fs.Uint("udp-port", 0, "site fan-out UDP port (0: ephemeral)")
		srvUDP   = fs.Uint("server-udp-port", 0, "server i's own UDP socket on server-udp-port+i (0: ephemeral)")
	)
	fs.IntVar(&o.Servers, "servers", 1, "number of servers")
	fs.IntVar(&o.NamesPerServer, "names", 10, "names per server")
	fs.IntVar(&o.NameLen, "name-len", 0, "mean name length (0: plain sim:s<i>:pv<j>)")
	fs.DurationVar(&o.BeaconInterval, "beacon-interval", 0, "fixed beacon period (0: PVXS schedule 15 s ×10, then 180 s)")
	fs.DurationVar(&o.UpdateInterval, "update-interval", 0, "every PV counts up once per interval (0: 1 s, negative: values stay)")
	fs.BoolVar(&o.Java, "java", false, "behave as Phoebus core-pva's Java server: no beacons, no server PV, negative CIDs taken as pings")
	var script []sim.Timed
	fs.Func("do", `run a site command this long after start, e.g. -do "10s restart 1" (repeatable; "help" on stdin lists commands)`, func(v string) error {
		c, err := sim.ParseTimed(v)
		script = append(script, c)
		return err
	})
	if err := fs.Parse(args); err != nil {
		return err
	}

	var err error
	if o.Host, err = netip.ParseAddr(*host); err != nil {
		return fmt.Errorf("-host: %w", err)
	}
	if *tcpPort > 65535 || *udpPort > 65535 || *srvUDP > 65535 {
		return fmt.Errorf("port out of range")
	}
	o.TCPPort, o.UDPPort, o.ServerUDPPort = uint16(*tcpPort), uint16(*udpPort), uint16(*srvUDP)
	for _, b := range strings.Split(*beacons, ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		ap, err := netip.ParseAddrPort(b)
		if err != nil {
			return fmt.Errorf("-beacon %q: %w", b, err)
		}
		o.BeaconDests = append(o.BeaconDests, ap)
	}
	var outMu sync.Mutex
	o.Logf = func(f string, a ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(stderr, time.Now().Format("15:04:05 ")+f+"\n", a...)
	}

	site, err := sim.Start(ctx, o)
	if err != nil {
		return err
	}
	defer site.Close()

	outMu.Lock()
	fmt.Fprintf(stdout, "site fan-out UDP %s\n", site.UDPAddr())
	for _, s := range site.Servers() {
		fmt.Fprintf(stdout, "server %d guid %s tcp %s udp %s names %d\n", s.Index, s.GUID, s.TCP, s.UDP, len(s.Names))
	}
	outMu.Unlock()
	if *namesOut != "" {
		if err := writeNames(*namesOut, site.AllNames()); err != nil {
			return err
		}
	}
	exec := func(line string) {
		res, err := site.Exec(line)
		outMu.Lock()
		defer outMu.Unlock()
		if err != nil {
			fmt.Fprintln(stderr, "pvans-sim:", err)
		} else if res != "" {
			fmt.Fprintln(stdout, res)
		}
	}
	for _, c := range script {
		t := time.AfterFunc(c.After, func() { exec(c.Command) })
		defer t.Stop()
	}
	go func() {
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			exec(sc.Text())
		}
		// End of input (a pipe, /dev/null): run on until a signal.
	}()
	<-ctx.Done()
	return nil
}

func writeNames(path string, names []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, n := range names {
		w.WriteString(n)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
