package deploy

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pvans-project/pvans/internal/config"
)

// root is the repository root; tests run in the package directory.
const root = "../.."

func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// productionConfig loads configs/pvans.yaml with no environment, the way
// the unit and the image start the daemon, so the artifacts can be checked
// against the effective ports and paths rather than against copies of them.
func productionConfig(t *testing.T) *config.Config {
	t.Helper()
	c, err := config.Load(config.LoadOptions{
		File:    filepath.Join(root, "configs", "pvans.yaml"),
		Resolve: noResolve,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func noResolve(host string) ([]netip.Addr, error) {
	return nil, fmt.Errorf("test resolves no host names (asked for %q)", host)
}

// metricDoc is one row of the table under "## Metrics" in
// docs/operations.md.
type metricDoc struct {
	Type   string
	Labels []string
}

var metricRow = regexp.MustCompile("^\\|\\s*`(pvans_[a-z0-9_]+)`\\s*\\|\\s*([a-z]+)\\s*\\|([^|]*)\\|\\s*(.*?)\\s*\\|\\s*$")

// documentedMetrics parses the metrics table of docs/operations.md, the
// one list of metric names the dashboard and alerts may use.
func documentedMetrics(t *testing.T) map[string]metricDoc {
	t.Helper()
	doc := readRepoFile(t, "docs/operations.md")
	out := map[string]metricDoc{}
	in := false
	sc := bufio.NewScanner(strings.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Metrics"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `pvans_") {
			continue
		}
		m := metricRow.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("docs/operations.md: malformed metric row %q", line)
		}
		if _, dup := out[m[1]]; dup {
			t.Errorf("docs/operations.md: metric %s listed twice", m[1])
		}
		switch m[2] {
		case "counter", "gauge", "histogram":
		default:
			t.Errorf("docs/operations.md: %s has type %q", m[1], m[2])
		}
		if m[4] == "" {
			t.Errorf("docs/operations.md: %s has no help text", m[1])
		}
		if strings.HasSuffix(m[1], "_total") != (m[2] == "counter") {
			t.Errorf("docs/operations.md: %s: counters, and only counters, end in _total", m[1])
		}
		var labels []string
		for _, l := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[3], -1) {
			labels = append(labels, l[1])
		}
		out[m[1]] = metricDoc{Type: m[2], Labels: labels}
	}
	if len(out) == 0 {
		t.Fatal("docs/operations.md: no metrics table under ## Metrics")
	}
	return out
}

// selector is one metric selector found in a PromQL expression.
type selector struct {
	Metric string
	Labels []string // label names in its matchers
}

// parsedExpr is what checkExpr needs from a PromQL expression.
type parsedExpr struct {
	Selectors []selector
	Grouping  []string // label names in by/without/on/ignoring/group_* lists
}

var groupingKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
var binaryKeywords = []string{"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
	// aggregation operators, which may be followed by "by (...)" rather than "("
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile"}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
func isIdent(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

// parsePromQL is a small PromQL scanner: it finds metric names (identifiers
// not called as functions and not keywords), the label names of their
// matchers and of grouping clauses. It skips strings, range selectors and
// numbers (with duration units), which is enough for dashboards and rules;
// promtool, when installed, does the full parse.
func parsePromQL(expr string) (parsedExpr, error) {
	var p parsedExpr
	i := 0
	skipSpace := func() {
		for i < len(expr) && strings.ContainsRune(" \t\r\n", rune(expr[i])) {
			i++
		}
	}
	skipString := func() error {
		q := expr[i]
		for i++; i < len(expr); i++ {
			if expr[i] == '\\' && q != '`' {
				i++
				continue
			}
			if expr[i] == q {
				i++
				return nil
			}
		}
		return fmt.Errorf("unterminated string in %q", expr)
	}
	ident := func() string {
		s := i
		for i < len(expr) && isIdent(expr[i]) {
			i++
		}
		return expr[s:i]
	}
	// labelList reads "(a, b)" after a grouping keyword.
	labelList := func() ([]string, error) {
		var out []string
		i++ // (
		for {
			skipSpace()
			if i >= len(expr) {
				return nil, fmt.Errorf("unterminated label list in %q", expr)
			}
			switch c := expr[i]; {
			case c == ')':
				i++
				return out, nil
			case c == ',':
				i++
			case isIdentStart(c):
				out = append(out, ident())
			default:
				return nil, fmt.Errorf("unexpected %q in label list of %q", c, expr)
			}
		}
	}
	// matchers reads "{a="x", b=~"y"}".
	matchers := func() ([]string, error) {
		var out []string
		i++ // {
		for {
			skipSpace()
			if i >= len(expr) {
				return nil, fmt.Errorf("unterminated matcher in %q", expr)
			}
			switch c := expr[i]; {
			case c == '}':
				i++
				return out, nil
			case c == ',' || c == '=' || c == '!' || c == '~':
				i++
			case c == '"' || c == '\'' || c == '`':
				if err := skipString(); err != nil {
					return nil, err
				}
			case isIdentStart(c):
				out = append(out, ident())
			default:
				return nil, fmt.Errorf("unexpected %q in matcher of %q", c, expr)
			}
		}
	}
	for {
		skipSpace()
		if i >= len(expr) {
			return p, nil
		}
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			if err := skipString(); err != nil {
				return p, err
			}
		case c == '[':
			j := strings.IndexByte(expr[i:], ']')
			if j < 0 {
				return p, fmt.Errorf("unterminated range in %q", expr)
			}
			i += j + 1
		case c == '{':
			return p, fmt.Errorf("selector without a metric name in %q", expr)
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case c == '$': // a Grafana variable outside a string
			i++
			ident()
		case isIdentStart(c):
			name := ident()
			skipSpace()
			next := byte(0)
			if i < len(expr) {
				next = expr[i]
			}
			lower := strings.ToLower(name)
			switch {
			case slices.Contains(groupingKeywords, lower):
				if next == '(' {
					l, err := labelList()
					if err != nil {
						return p, err
					}
					p.Grouping = append(p.Grouping, l...)
				}
			case next == '(' || slices.Contains(binaryKeywords, lower):
				// a function call or an operator keyword
			default:
				s := selector{Metric: name}
				if next == '{' {
					l, err := matchers()
					if err != nil {
						return p, err
					}
					s.Labels = l
				}
				p.Selectors = append(p.Selectors, s)
			}
		default:
			i++
		}
	}
}

// targetLabels are attached by Prometheus to every scraped series.
var targetLabels = []string{"job", "instance"}

// extraMetrics are series the dashboard and alerts may use that pvans does
// not export itself.
var extraMetrics = map[string]metricDoc{"up": {Type: "gauge"}}

// resolveMetric finds the documented metric a series name belongs to,
// allowing the _bucket/_sum/_count series of a histogram. It returns the
// family name and the labels its series may carry.
func resolveMetric(docs map[string]metricDoc, name string) (string, []string, bool) {
	if d, ok := docs[name]; ok {
		return name, append(slices.Clone(d.Labels), targetLabels...), true
	}
	if d, ok := extraMetrics[name]; ok {
		return name, append(slices.Clone(d.Labels), targetLabels...), true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		if d, ok := docs[base]; ok && d.Type == "histogram" {
			l := append(slices.Clone(d.Labels), targetLabels...)
			if suf == "_bucket" {
				l = append(l, "le")
			}
			return base, l, true
		}
	}
	return "", nil, false
}

// checkExpr returns the metric families expr uses and its problems:
// unknown metrics, labels a metric does not carry, grouping by labels none
// of its metrics carries.
func checkExpr(expr string, docs map[string]metricDoc) (used, problems []string) {
	p, err := parsePromQL(expr)
	if err != nil {
		return nil, []string{err.Error()}
	}
	if len(p.Selectors) == 0 {
		problems = append(problems, fmt.Sprintf("no metric in %q", expr))
	}
	var allowed []string
	for _, s := range p.Selectors {
		fam, labels, ok := resolveMetric(docs, s.Metric)
		if !ok {
			problems = append(problems, fmt.Sprintf("metric %s is not in the docs/operations.md metrics table", s.Metric))
			continue
		}
		used = append(used, fam)
		allowed = append(allowed, labels...)
		for _, l := range s.Labels {
			if !slices.Contains(labels, l) {
				problems = append(problems, fmt.Sprintf("%s has no label %q (it has %v)", s.Metric, l, labels))
			}
		}
	}
	for _, l := range p.Grouping {
		if !slices.Contains(allowed, l) {
			problems = append(problems, fmt.Sprintf("groups by %q, which none of its metrics carries", l))
		}
	}
	return used, problems
}

// requireExpr fails t for every problem checkExpr finds.
func requireExpr(t *testing.T, where, expr string, docs map[string]metricDoc) []string {
	t.Helper()
	used, problems := checkExpr(expr, docs)
	for _, p := range problems {
		t.Errorf("%s: %s", where, p)
	}
	return used
}

func TestParsePromQL(t *testing.T) {
	p, err := parsePromQL(`histogram_quantile(0.99, sum by (le) (rate(pvans_probe_duration_seconds_bucket{job="$job", instance=~"a|b"}[$__rate_interval])))
		/ on (instance) group_left (version) pvans_build_info offset 5m and bool up{job='x\'y'} > 1e3`)
	if err != nil {
		t.Fatal(err)
	}
	want := []selector{{"pvans_probe_duration_seconds_bucket", []string{"job", "instance"}}, {"pvans_build_info", nil}, {"up", []string{"job"}}}
	if fmt.Sprint(p.Selectors) != fmt.Sprint(want) {
		t.Errorf("selectors = %v, want %v", p.Selectors, want)
	}
	if fmt.Sprint(p.Grouping) != "[le instance version]" {
		t.Errorf("grouping = %v", p.Grouping)
	}
	for _, bad := range []string{`rate(x{a="b"[5m])`, `{__name__="x"}`, `sum by (a`, `x{a="b}`} {
		if _, err := parsePromQL(bad); err == nil {
			t.Errorf("parsePromQL(%q) accepted it", bad)
		}
	}
}

func TestCheckExprCatchesUnknownNames(t *testing.T) {
	docs := map[string]metricDoc{
		"pvans_a_total": {Type: "counter", Labels: []string{"reason"}},
		"pvans_h":       {Type: "histogram"},
	}
	good := []string{
		`sum by (reason) (rate(pvans_a_total{reason="x", job="pvans"}[5m]))`,
		`histogram_quantile(0.5, sum by (le) (rate(pvans_h_bucket[5m])))`,
		`rate(pvans_h_sum[5m]) / rate(pvans_h_count[5m])`,
		`up == 0`,
	}
	for _, e := range good {
		if _, problems := checkExpr(e, docs); len(problems) > 0 {
			t.Errorf("checkExpr(%q) = %v, want no problems", e, problems)
		}
	}
	bad := []string{
		`rate(pvans_b_total[5m])`,           // unknown metric
		`rate(pvans_a_total{kind="x"}[5m])`, // unknown label
		`sum by (kind) (rate(pvans_a_total[5m]))`,
		`rate(pvans_a_total_bucket[5m])`, // not a histogram
		`pvans_h{le="1"}`,                // le only on _bucket
	}
	for _, e := range bad {
		if _, problems := checkExpr(e, docs); len(problems) == 0 {
			t.Errorf("checkExpr accepted %q", e)
		}
	}
}
