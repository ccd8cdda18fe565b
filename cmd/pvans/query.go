package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"text/tabwriter"
	"time"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/nsclient"
)

// cmdQuery resolves names through a name server over TCP, as a PVXS client
// with EPICS_PVA_NAME_SERVERS would, and prints who serves each.
func cmdQuery(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pvans query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := "127.0.0.1:5075"
	if v, ok := os.LookupEnv("EPICS_PVA_NAME_SERVERS"); ok && v != "" {
		def = v
	}
	server := fs.String("server", def, "name server `host:port` (default: first of $EPICS_PVA_NAME_SERVERS, else 127.0.0.1:5075)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up on unresolved names after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "pvans query: no names given\nusage: pvans query [--server HOST:PORT] [--timeout D] NAME...")
		return 2
	}
	eps, err := config.ParseAddrList(*server, 5075)
	if err != nil || len(eps) == 0 {
		fmt.Fprintf(stderr, "pvans query: --server %q: %v\n", *server, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	c, err := nsclient.Dial(ctx, eps[0])
	if err != nil {
		fmt.Fprintf(stderr, "pvans query: cannot reach name server %s: %v\n", eps[0], err)
		return 1
	}
	defer c.Close()
	if err := c.Search(fs.Args()); err != nil {
		fmt.Fprintln(stderr, "pvans query:", err)
	}
	answers, unresolved, err := c.Wait(ctx)
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tENDPOINT\tGUID\tAFTER")
	for _, a := range answers {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.Name, a.Endpoint, a.GUID, a.At.Round(time.Microsecond))
	}
	_ = tw.Flush()
	if err != nil {
		fmt.Fprintln(stderr, "pvans query:", err)
	}
	for _, n := range unresolved {
		fmt.Fprintf(stderr, "pvans query: %s: not resolved within %s\n", n, *timeout)
	}
	if len(unresolved) > 0 || err != nil {
		return 1
	}
	return 0
}

// cmdHealthz GETs a health URL and exits 0 on 200 (for container
// HEALTHCHECKs, where no curl is installed).
func cmdHealthz(args []string, stdout, stderr io.Writer) int {
	url := "http://127.0.0.1:9076/healthz"
	if len(args) > 0 {
		url = args[0]
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		fmt.Fprintln(stderr, "pvans healthz:", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(stderr, "pvans healthz:", resp.Status)
		return 1
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}
