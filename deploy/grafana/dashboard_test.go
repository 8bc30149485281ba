// Package grafana holds readyspan's Grafana dashboard (readyspan.json). It has no Go code of its
// own: this test checks that the dashboard parses, that its panels are well formed and that every
// query names only metrics readyspan exposes, so a renamed metric cannot leave a blank panel.
package grafana

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/readyspan/readyspan/deploy/internal/exposed"
)

type panel struct {
	ID         int     `json:"id"`
	Type       string  `json:"type"`
	Title      string  `json:"title"`
	Datasource *source `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Expr       string  `json:"expr"`
		RefID      string  `json:"refId"`
		Datasource *source `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

type source struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
}

var metricName = regexp.MustCompile(`\b(readyspan_[a-z_]+|up)\b`)

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile("readyspan.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("readyspan.json: %v", err)
	}
	return d
}

func TestDashboard(t *testing.T) {
	d := readDashboard(t)
	metrics, err := exposed.Read()
	if err != nil {
		t.Fatal(err)
	}
	series := metrics.Series
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: both must be set so re-imports replace the dashboard", d.UID, d.Title)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	for _, want := range []string{"datasource", "job", "phase"} {
		if !slices.Contains(vars, want) {
			t.Errorf("template variable %q is missing", want)
		}
	}

	ids := map[int]string{}
	var queries int
	for _, p := range d.Panels {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panel %q reuses id %d of %q", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: bad gridPos %+v", p.Title, p.GridPos)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the $datasource variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q query %s does not use the $datasource variable", p.Title, tg.RefID)
			}
			if !strings.Contains(tg.Expr, `job=~"$job"`) {
				t.Errorf("panel %q query %s is not filtered by $job: %s", p.Title, tg.RefID, tg.Expr)
			}
			names := metricName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q query %s names no metric: %s", p.Title, tg.RefID, tg.Expr)
			}
			for _, n := range names {
				if n == "up" { // added by Prometheus per target
					continue
				}
				if !series[n] {
					t.Errorf("panel %q query %s uses %s, which readyspan does not expose", p.Title, tg.RefID, n)
				}
			}
		}
	}
	if queries == 0 {
		t.Error("the dashboard has no queries")
	}
}

// TestQueriesParse hands every query, with Grafana's variables filled in, to
// `promtool check rules` as a recording rule, which parses the PromQL. It runs when the local
// cluster's build (make cluster-build) has put promtool into bin/.
func TestQueriesParse(t *testing.T) {
	promtool, err := filepath.Abs("../../bin/promtool")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(promtool); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool not built: CI must check the dashboard's queries (make cluster-build first): %v", err)
		}
		t.Skipf("promtool not built (make cluster-build): %v", err)
	}
	vars := strings.NewReplacer(
		"$__rate_interval", "5m",
		"$__range", "1h",
		"$job", "readyspan",
		"$phase", "scheduling",
	)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	d := readDashboard(t)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			expr, err := json.Marshal(vars.Replace(tg.Expr)) // a JSON string is a YAML string
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&rules, "      - record: panel_%d_%s\n        expr: %s\n", p.ID, tg.RefID, expr)
		}
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", "--lint=none", file).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}
