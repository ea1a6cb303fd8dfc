package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtool returns Debian's promtool (scripts/deps.sh installs it); the
// test fails without it in CI and is skipped elsewhere.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is missing: bash scripts/deps.sh promtool installs it")
		}
		t.Skip("promtool is not installed: bash scripts/deps.sh promtool")
	}
	return p
}

// TestAlertRulesPromtool: the rules load in Prometheus (promtool check
// rules) and each alert fires on the series that should fire it, and
// only then (promtool test rules, monitoring/deltabus-alerts_test.yaml).
func TestAlertRulesPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", "deltabus-alerts.yaml"}, {"test", "rules", "deltabus-alerts_test.yaml"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = "monitoring"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

type dashboard struct {
	UID    string `json:"uid"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// exportedMetrics reads the golden lists the relay, `relay check
// consumers` and `relay reconcile` are tested against (each checked
// against the real process's /metrics by its own test): every series name
// they expose.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, f := range []string{"../tests/e2e/testdata/relay_metrics.golden", "../subscribe/check/testdata/metrics.golden", "../reconcile/testdata/metrics.golden"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			names[strings.FieldsFunc(l, func(r rune) bool { return r == ' ' || r == '{' })[0]] = true
		}
	}
	return names
}

var (
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
		"on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true}
)

// metricNames returns the metric names a PromQL expression selects: what
// is left once strings, label matchers, ranges, grouping clauses,
// function names, keywords and numbers are taken out.
func metricNames(expr string) []string {
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, " ")
	e = promRanges.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	var out []string
	for _, m := range promIdent.FindAllStringSubmatch(e, -1) {
		if m[1] != "" || promKeywords[strings.ToLower(m[0])] {
			continue // a function call or an operator
		}
		out = append(out, m[0])
	}
	return out
}

func TestMetricNamesOfAnExpression(t *testing.T) {
	got := metricNames(`histogram_quantile(0.99, sum by (le, topic) (rate(deltabus_end_to_end_seconds_bucket{topic=~"a|b"}[5m]))) > on(instance) group_left up and time() - deltabus_reconcile_last_run_timestamp_seconds > 3 * 3600`)
	if strings.Join(got, " ") != "deltabus_end_to_end_seconds_bucket up deltabus_reconcile_last_run_timestamp_seconds" {
		t.Fatalf("metricNames = %q", got)
	}
}

// TestMonitoringNamesExportedMetrics: every metric the alert rules and the
// Grafana dashboard select is one DeltaBus exports; every alert has a
// severity; the dashboard's panels each query Prometheus through its
// datasource variable.
func TestMonitoringNamesExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	var exprs []string
	b, err := os.ReadFile(filepath.Join("monitoring", "deltabus-alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(b, &rf); err != nil {
		t.Fatalf("alert rules: %v", err)
	}
	alerts := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("alert %s: severity %q", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: no summary or description", r.Alert)
			}
			exprs = append(exprs, r.Expr)
		}
	}
	for _, a := range []string{"DeltaBusSlotLagHigh", "DeltaBusWALHeadroomLow", "DeltaBusTopicHeld", "DeltaBusConsumerLagHigh",
		"DeltaBusConsumerHeadroomLow", "DeltaBusDeadLetters", "DeltaBusReconcileDiverged"} {
		if !alerts[a] {
			t.Errorf("no alert %s", a)
		}
	}
	b, err = os.ReadFile(filepath.Join("monitoring", "deltabus-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("dashboard: panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 || p.Datasource.UID != "${datasource}" {
			t.Errorf("dashboard panel %q: %d targets, datasource %q", p.Title, len(p.Targets), p.Datasource.UID)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	if d.UID == "" || len(ids) < 10 {
		t.Errorf("dashboard uid %q, %d panels", d.UID, len(ids))
	}
	used := map[string]bool{}
	for _, e := range exprs {
		names := metricNames(e)
		if len(names) == 0 {
			t.Errorf("expression %q selects no metric", e)
		}
		for _, n := range names {
			used[n] = true
			if !exported[n] {
				t.Errorf("%q names %s, which no DeltaBus process exports (tests/e2e, subscribe/check and reconcile golden lists)", e, n)
			}
		}
	}
	list := make([]string, 0, len(used))
	for n := range used {
		list = append(list, n)
	}
	sort.Strings(list)
	t.Logf("%d metrics used: %s", len(list), strings.Join(list, " "))
}
