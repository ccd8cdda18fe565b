package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/nsclient"
)

// cmdQuery resolves names through name servers over TCP, as a PVXS client
// with EPICS_PVA_NAME_SERVERS would: it connects to every server listed,
// sends each the same searches, and takes the first answer for each name
// from whichever server gives it. A server it cannot reach is reported and
// skipped, so with replicas listed a dead one costs nothing.
func cmdQuery(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pvans query", flag.ContinueOnError)
	def := "127.0.0.1:5075"
	if v, ok := os.LookupEnv("EPICS_PVA_NAME_SERVERS"); ok && strings.TrimSpace(v) != "" {
		def = v
	}
	server := fs.String("server", def, "name servers, `host:port ...` (default: $EPICS_PVA_NAME_SERVERS, else 127.0.0.1:5075)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up on unresolved names after this long")
	if err := parseFlags(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "pvans query: no names given\nusage: pvans query [--server 'HOST:PORT ...'] [--timeout D] NAME...")
		return 2
	}
	eps, err := config.ParseAddrList(*server, 5075)
	if err != nil || len(eps) == 0 {
		fmt.Fprintf(stderr, "pvans query: --server %q: %v\n", *server, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	clients := dialAll(ctx, eps, stderr)
	if len(clients) == 0 {
		return 1
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	names := fs.Args()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	type result struct {
		via     netip.AddrPort
		answers []nsclient.Answer
		err     error
	}
	results := make(chan result, len(clients))
	for ap, c := range clients {
		if err := c.Search(names); err != nil {
			fmt.Fprintf(stderr, "pvans query: %s: %s\n", ap, termSafe(err.Error()))
		}
		go func() {
			a, _, err := c.Wait(ctx)
			results <- result{ap, a, err}
		}()
	}
	type answer struct {
		nsclient.Answer
		via netip.AddrPort
	}
	best := map[string]answer{}
	failed := 0
	for range clients {
		r := <-results
		if r.err != nil {
			failed++
			fmt.Fprintf(stderr, "pvans query: %s: %s\n", r.via, termSafe(r.err.Error()))
		}
		for _, a := range r.answers {
			if b, ok := best[a.Name]; !ok || a.At < b.At {
				best[a.Name] = answer{a, r.via}
			}
		}
		if len(best) == len(want) {
			cancel() // every name answered: stop waiting for the others
		}
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	printRow(tw, "NAME", "ENDPOINT", "GUID", "VIA", "AFTER")
	var unresolved []string
	for _, n := range names {
		a, ok := best[n]
		if !ok {
			if want[n] {
				unresolved = append(unresolved, n)
				want[n] = false
			}
			continue
		}
		printRow(tw, a.Name, a.Endpoint.String(), a.GUID.String(), a.via.String(), a.At.Round(time.Microsecond).String())
	}
	_ = tw.Flush()
	for _, n := range unresolved {
		fmt.Fprintf(stderr, "pvans query: %s: not resolved within %s\n", termSafe(n), *timeout)
	}
	if len(unresolved) > 0 || failed == len(clients) {
		return 1
	}
	return 0
}

// dialAll connects to every name server at once; the unreachable ones are
// reported on stderr and left out.
func dialAll(ctx context.Context, eps []netip.AddrPort, stderr io.Writer) map[netip.AddrPort]*nsclient.Client {
	type dialed struct {
		ap  netip.AddrPort
		c   *nsclient.Client
		err error
	}
	ch := make(chan dialed, len(eps))
	for _, ap := range eps {
		go func() {
			c, err := nsclient.Dial(ctx, ap)
			ch <- dialed{ap, c, err}
		}()
	}
	out := map[netip.AddrPort]*nsclient.Client{}
	for range eps {
		d := <-ch
		if d.err != nil {
			fmt.Fprintf(stderr, "pvans query: cannot reach name server %s: %s\n", d.ap, termSafe(d.err.Error()))
			continue
		}
		out[d.ap] = d.c
	}
	return out
}

// cmdHealthz GETs a health URL and exits 0 on 200 (for container
// HEALTHCHECKs, where no curl is installed). It speaks https to a listener
// with a web configuration file: --ca-file pins the CA that signed the
// daemon's certificate (--insecure skips the check, for a loopback URL),
// --cert-file and --key-file present a client certificate, and a URL's
// user:password@ is sent as basic auth.
func cmdHealthz(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pvans healthz", flag.ContinueOnError)
	caFile := fs.String("ca-file", "", "verify the daemon's certificate against the CA certificates in `FILE` (PEM) instead of the system's")
	insecure := fs.Bool("insecure", false, "do not verify the daemon's certificate (only for a loopback URL)")
	certFile := fs.String("cert-file", "", "client certificate `FILE` (PEM), for client_auth_type RequireAndVerifyClientCert")
	keyFile := fs.String("key-file", "", "the client certificate's key `FILE` (PEM)")
	if err := parseFlags(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	url := "http://127.0.0.1:9076/healthz"
	if fs.NArg() > 0 {
		url = fs.Arg(0)
	}
	tc := &tls.Config{InsecureSkipVerify: *insecure}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			fmt.Fprintln(stderr, "pvans healthz:", err)
			return 1
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			fmt.Fprintf(stderr, "pvans healthz: %s: no PEM certificate\n", *caFile)
			return 1
		}
	}
	if (*certFile == "") != (*keyFile == "") {
		fmt.Fprintln(stderr, "pvans healthz: give both --cert-file and --key-file")
		return 2
	}
	if *certFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			fmt.Fprintln(stderr, "pvans healthz:", err)
			return 1
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
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
