package deploy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"testing"
)

type grafanaTarget struct {
	Expr  string `json:"expr"`
	RefID string `json:"refId"`
}

type grafanaPanel struct {
	ID         int                      `json:"id"`
	Type       string                   `json:"type"`
	Title      string                   `json:"title"`
	Datasource *struct{ UID string }    `json:"datasource"`
	GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
	Targets    []grafanaTarget          `json:"targets"`
	Panels     []grafanaPanel           `json:"panels"` // inside collapsed rows
}

type grafanaDashboard struct {
	UID        string         `json:"uid"`
	Title      string         `json:"title"`
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

var labelValues = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// TestGrafanaDashboard checks the dashboard parses, is laid out on
// Grafana's 24-column grid, queries only documented metrics and labels,
// and shows every documented metric somewhere.
func TestGrafanaDashboard(t *testing.T) {
	docs := documentedMetrics(t)
	var d grafanaDashboard
	if err := json.Unmarshal([]byte(readRepoFile(t, "deploy/grafana/pvans.json")), &d); err != nil {
		t.Fatalf("deploy/grafana/pvans.json: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Error("dashboard needs a uid and a title (stable links, imports that replace)")
	}
	used := map[string]bool{}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Errorf("variable %s: query: %v", v.Name, err)
			continue
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: want label_values(SELECTOR, LABEL), got %q", v.Name, q.Query)
			continue
		}
		for _, fam := range requireExpr(t, "variable "+v.Name, m[1], docs) {
			used[fam] = true
			if _, labels, _ := resolveMetric(docs, fam); !slices.Contains(labels, m[2]) {
				t.Errorf("variable %s: %s has no label %s", v.Name, fam, m[2])
			}
		}
	}
	for _, v := range []string{"datasource", "job", "instance"} {
		if !vars[v] {
			t.Errorf("dashboard lacks the %s variable", v)
		}
	}

	ids := map[int]string{}
	var walk func(ps []grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if prev, dup := ids[p.ID]; dup || p.ID == 0 {
				t.Errorf("%s: id not unique (also %q)", where, prev)
			}
			ids[p.ID] = p.Title
			if p.Title == "" {
				t.Errorf("%s: no title", where)
			}
			if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				t.Errorf("%s: gridPos %+v outside the 24-column grid", where, g)
			}
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("%s: datasource must be the ${datasource} variable", where)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no queries", where)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("%s: refId %q missing or repeated", where, tg.RefID)
				}
				refs[tg.RefID] = true
				for _, fam := range requireExpr(t, where, tg.Expr, docs) {
					used[fam] = true
				}
				// Every query must follow the job/instance selection.
				p, _ := parsePromQL(tg.Expr)
				for _, s := range p.Selectors {
					if !slices.Contains(s.Labels, "job") || !slices.Contains(s.Labels, "instance") {
						t.Errorf("%s: %s is not filtered by $job and $instance", where, s.Metric)
					}
				}
			}
		}
	}
	walk(d.Panels)
	for name := range docs {
		if !used[name] {
			t.Errorf("documented metric %s appears nowhere on the dashboard", name)
		}
	}
}
