// Command pvans-bench drives a PVA name server (pvans, or any PVA server)
// with searches and reports claims/s, messages/s, latency percentiles and,
// given -pid, the target's CPU per message. See package internal/bench for
// the modes and what each measures.
//
//	pvans-bench -mode tcp -target 127.0.0.1:5075 -names names.txt -hit-fraction 0.9 -conns 8 -duration 10s
//	pvans-bench -mode udp -target 127.0.0.1:5076 -names names.txt -must-reply -window 32 -json
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/pvans-project/pvans/internal/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pvans-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		c       bench.Config
		mode    = flag.String("mode", "udp", "udp or tcp")
		target  = flag.String("target", "127.0.0.1:5076", "host:port of the target (UDP search port, or TCP port)")
		namesF  = flag.String("names", "", "file of names that exist on the target, one a line")
		asJSON  = flag.Bool("json", false, "print the report as JSON")
		hitFrac = flag.Float64("hit-fraction", -1, "fraction of searched names taken from -names (default 1 with -names, else 0)")
	)
	flag.IntVar(&c.Distinct, "distinct", 0, "distinct names cycled through (default: every hit once)")
	flag.IntVar(&c.MissLen, "miss-len", 0, "length of generated miss names (default: mean hit length)")
	flag.IntVar(&c.NamesPerMsg, "names-per-msg", 0, "names per message (0: pack to 1400 bytes like PVXS)")
	flag.IntVar(&c.Window, "window", 64, "unanswered messages allowed (per connection for tcp)")
	flag.IntVar(&c.Conns, "conns", 1, "TCP connections")
	flag.Int64Var(&c.Count, "count", 0, "stop after this many messages (0: no limit)")
	flag.DurationVar(&c.Duration, "duration", 0, "stop after this long (default 5s when -count is 0)")
	flag.Float64Var(&c.Rate, "rate", 0, "total messages/s (0: as fast as the window allows)")
	flag.BoolVar(&c.MustReply, "must-reply", false, "set MustReply so every message is answered (latency mode)")
	flag.DurationVar(&c.Timeout, "timeout", 0, "give up on a message's reply after this long (default 500ms)")
	flag.IntVar(&c.PID, "pid", 0, "target PID: report its CPU per message from /proc/<pid>/stat")
	flag.Parse()

	c.Mode = bench.Mode(*mode)
	ap, err := netip.ParseAddrPort(*target)
	if err != nil {
		return fmt.Errorf("-target: %w", err)
	}
	c.Target = ap
	if *namesF != "" {
		if c.Hits, err = readNames(*namesF); err != nil {
			return err
		}
	}
	c.HitFraction = *hitFrac
	if c.HitFraction < 0 {
		c.HitFraction = 0
		if len(c.Hits) > 0 {
			c.HitFraction = 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, c)
	if rep != nil {
		if *asJSON {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			if jerr := enc.Encode(rep); jerr != nil {
				return jerr
			}
		} else {
			fmt.Print(rep)
		}
	}
	return err
}

func readNames(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if n := strings.TrimSpace(sc.Text()); n != "" && !strings.HasPrefix(n, "#") {
			names = append(names, n)
		}
	}
	return names, sc.Err()
}
