package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/deltabus/deltabus/tests/metricstest"
)

// chromium returns Debian's chromium-headless-shell (scripts/deps.sh
// installs it); without it the test fails in CI and is skipped elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("DELTABUS_CHROMIUM"), "/usr/lib/chromium/chromium-headless-shell"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if p, err := exec.LookPath("chromium-headless-shell"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium-headless-shell is missing: scripts/deps.sh installs it (bash scripts/deps.sh chromium)")
	}
	t.Skip("chromium-headless-shell is not installed: bash scripts/deps.sh chromium")
	return ""
}

// browser starts a headless Chromium of its own (a new empty profile, no
// network of its own: every flag that makes it call home is off) and
// returns a context to drive it.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1440, 1100),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancel3)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", chromium(t), err)
	}
	return ctx
}

// artifactDir is where tests keep files for people to look at
// (DELTABUS_TEST_ARTIFACTS, default /tmp/deltabus-artifacts).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("DELTABUS_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "deltabus-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pageText reads the rendered text of the element sel selects, waiting up
// to 10 s for it to exist. The page replaces its content every refresh, so
// a query that finds a node and then reads it in a second call can meet a
// node already gone ("No node with given id found"); one script finds and
// reads the element in the same turn of the page's event loop.
func pageText(ctx context.Context, sel string) (string, error) {
	type found struct {
		OK   bool   `json:"ok"`
		Text string `json:"text"`
	}
	js := `(function(){const e=document.querySelector(` + strconv.Quote(sel) + `);return e?{ok:true,text:e.innerText}:{ok:false,text:""}})()`
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err := chromedp.Run(ctx, chromedp.Evaluate[found](js))
		if err != nil || f.OK {
			return f.Text, err
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no element matches %s", sel)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestOperatorPageInBrowser loads the operator's page of a running relay
// in a real headless Chromium: after its script ran, the page has a row
// per topic (held or not), the source, a consumer group's row, the last
// reconcile and the dead letters of the last hour; a stopped consumer's
// lag grows on the page as events keep coming, without a reload. The
// screenshot is kept as a test artifact (DELTABUS_UPDATE_SCREENSHOT=1 also
// writes docs/img/operator-page.png).
func TestOperatorPageInBrowser(t *testing.T) {
	began := time.Now()
	phase := func(what string) { t.Logf("%6.1fs %s", time.Since(began).Seconds(), what) }
	ctx := browser(t)
	phase("browser")
	db := setup(t)
	url, _ := localStore(t)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('orders', 'o0', 'Created', '{}'), ('payments', 'p0', 'Paid', '{}')`)
	addr := freeAddr(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url}
	p := startRelay(t, env, "--batch-max-delay", "20ms", "--metrics-addr", addr, "--status-refresh", "1s")
	waitSlotActive(t, db.DSN, "deltabus", p)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) SELECT t, 'k' || i, 'Created', '{}' FROM generate_series(1, 20) i, unnest(ARRAY['orders', 'payments']) t`)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('Bad/Topic', 'x', 'Oops', '{}'), ('Worse/Topic', 'y', 'Oops', '{}')`)
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	for _, d := range [][]string{{"orders", "team-checkout", "Every order's lifecycle, authoritative."}, {"payments", "team-payments", "Captured and refunded payments."}} {
		if out, errOut, code := runRelayCmd(t, env, "topics", "describe", "--topic", d[0], "--owner", d[1], "--description", d[2]); code != 0 {
			t.Fatalf("describe %s: %s %s", d[0], out, errOut)
		}
	}
	phase("described")
	// A consumer that reads orders once and stops, and a recorded reconcile.
	if out, errOut, code := runRelayCmd(t, env, "consume", "--topic", "orders", "--group", "billing"); code != 0 {
		t.Fatalf("consume: %d %s", code, errOut+out[:min(len(out), 200)])
	}
	if out, errOut, code := runRelayCmd(t, env, "reconcile", "--last", "10m", "--window", "1m", "--lateness", "1s"); code > 1 {
		t.Fatalf("reconcile: %d %s %s", code, out, errOut)
	}

	phase("consumed, reconciled")
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+addr+"/"), chromedp.WaitVisible(`#consumers tr[data-group="billing"]`)); err != nil {
		t.Fatalf("load the page: %v\n%s", err, p.tail())
	}
	if script, err := chromedp.Run(ctx, chromedp.AttributeValue(`#main`, "data-script")); err != nil || script.Value != "ran" {
		t.Fatalf("the page's script did not run: %+v %v", script, err)
	}
	lagOnPage := func() int {
		s, err := pageText(ctx, `#consumers tr[data-group="billing"][data-topic="orders"] td.lag-versions`)
		if err != nil {
			t.Fatalf("read the lag: %v", err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			t.Fatalf("lag cell %q", s)
		}
		return n
	}
	lag0 := lagOnPage()
	phase("page loaded")
	// Events keep coming; the consumer stays stopped; the page refreshes
	// itself (its script fetches the relay's rendering) and shows the lag
	// growing.
	stop := streamer(t, db.DSN, "orders")
	deadline := time.Now().Add(time.Minute)
	var lag int
	for lag = lagOnPage(); lag < lag0+3; lag = lagOnPage() {
		if time.Now().After(deadline) {
			t.Fatalf("the consumer's lag on the page stayed at %d (was %d)", lag, lag0)
		}
		time.Sleep(500 * time.Millisecond)
	}
	stop()
	phase("lag grew")
	refreshed, err := chromedp.Run(ctx, chromedp.AttributeValue(`#main`, "data-refreshed"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#topics tbody tr')).map(r => r.getAttribute('data-topic') + (r.classList.contains('held') ? ':held' : ''))`))
	if err != nil {
		t.Fatal(err)
	}
	text := map[string]string{}
	for _, sec := range []string{"topics", "sources", "dead-letters", "reconcile", "slot"} {
		if text[sec], err = pageText(ctx, "#"+sec); err != nil {
			t.Fatal(err)
		}
	}
	if !refreshed.Exists {
		t.Fatal("the page never refreshed itself")
	}
	if strings.Join(rows, ",") != "_dead_letter,orders,payments" {
		t.Errorf("topic rows: %v", rows)
	}
	for what, c := range map[string][2]string{
		"topics":       {text["topics"], "team-checkout"},
		"sources":      {text["sources"], "(this relay)"},
		"dead letters": {text["dead-letters"], "Dead letters in the last hour: 2"},
		"reconcile":    {text["reconcile"], "clean"},
		"slot":         {text["slot"], "not yet acknowledged"},
	} {
		if !strings.Contains(c[0], c[1]) {
			t.Errorf("%s section lacks %q:\n%s", what, c[1], c[0])
		}
	}
	if strings.Contains(text["dead-letters"], "Bad/Topic") {
		t.Errorf("the page shows a value a producer wrote: %s", text["dead-letters"])
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(artifactDir(t), "operator-page.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes); lag on the page %d -> %d", shot, len(png), lag0, lag)
	if os.Getenv("DELTABUS_UPDATE_SCREENSHOT") != "" {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "img", "operator-page.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := metricstest.Scrape("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"deltabus_slot_lag_bytes", "deltabus_slot_retained_wal_bytes", "deltabus_slot_active"} {
		if mfs[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if ms := mfs["deltabus_slot_active"].GetMetric(); len(ms) != 1 || ms[0].GetGauge().GetValue() != 1 {
		t.Errorf("deltabus_slot_active = %v while the relay streams", ms)
	}
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.tail())
	}
}
