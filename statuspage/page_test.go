package statuspage

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/grouptest"
)

// newStore holds topic "orders" (held: its table was changed
// incompatibly), with a hostile description, and dead letters committed
// now and two hours ago.
func newStore(t *testing.T) storage.Store {
	t.Helper()
	ctx := context.Background()
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"orders", outbox.DeadLetterTopic} {
		md, proto := topic.NewTableMetadata(n)
		if err := delta.CreateTable(ctx, storage.Sub(store, n), md, proto, nil); err != nil {
			t.Fatal(err)
		}
		if err := catalog.RegisterTopic(ctx, store, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := catalog.WriteTopicMeta(ctx, store, catalog.TopicMeta{Topic: "orders", Owner: "team-<b>checkout</b>",
		Description: `<script>alert("x")</script><img src=x onerror=alert(1)>`}); err != nil {
		t.Fatal(err)
	}
	if err := catalog.WriteRebuildState(ctx, store, catalog.RebuildState{Topic: "orders", AppID: "deltabus-main", Paused: catalog.HoldIncompatibleTable, PausedAt: "0/16B3748", Last: "incompatible table: schema changed"}); err != nil {
		t.Fatal(err)
	}
	dlt := storage.Sub(store, outbox.DeadLetterTopic)
	now := time.Now().UTC()
	var dls []outbox.DeadLetter
	for i, at := range []time.Time{now, now, now.Add(-2 * time.Hour)} {
		dls = append(dls, outbox.DeadLetter{Event: outbox.Event{ID: string(rune('a' + i)), CommitTime: at, CommitLSN: int64(100 + i)},
			Reason: `invalid topic name "Secret/` + string(rune('A'+i)) + `" in column "topic"`, SourceTable: "public.outbox", RawRow: `{"payload":"card 4111"}`})
	}
	w := topic.NewFileWriter(dlt, topic.FileOptions{DeadLetter: true})
	for i := range dls {
		if err := w.AppendDeadLetter(&dls[i]); err != nil {
			t.Fatal(err)
		}
	}
	adds, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.OpenTable(ctx, dlt, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, delta.CommitActions{Adds: adds}); err != nil {
		t.Fatal(err)
	}
	return store
}

func get(t *testing.T, url string) (string, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	return string(b), resp.Header
}

// TestPageEscapesAndHidesValues: the page renders what the store holds,
// escaped (a description is text, never markup); dead letters are counted
// by reason for the last hour with the quoted values left out; no raw row
// reaches the page or the JSON.
func TestPageEscapesAndHidesValues(t *testing.T) {
	c := New(Config{Store: newStore(t), AppID: func() string { return "deltabus-main" }, Slot: "main", Version: "test",
		Ready: func() (bool, string) { return false, "not streaming (starting)" }})
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	page, h := get(t, srv.URL+"/")
	if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("CSP %q", h.Get("Content-Security-Policy"))
	}
	for _, bad := range []string{"<script>alert", "<img src=x", "<b>checkout", "Secret/", "4111"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;", `<tr data-topic="orders" class="held">`, "incompatible-table",
		`Dead letters in the last hour: <span id="dead-letter-total">2</span>`, `invalid topic name &#34;…&#34; in column &#34;…&#34;`,
		"not ready: not streaming (starting)", `<script src="/status.js"></script>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	main, _ := get(t, srv.URL+"/?part=main")
	if strings.Contains(main, "<html") || !strings.Contains(main, `id="topics"`) {
		t.Errorf("the main part: %.200s", main)
	}
	js, h := get(t, srv.URL+"/status.js")
	if !strings.Contains(js, `fetch("/?part=main"`) || !strings.HasPrefix(h.Get("Content-Type"), "text/javascript") {
		t.Errorf("status.js: %s %.100s", h.Get("Content-Type"), js)
	}
	body, _ := get(t, srv.URL+"/api/status")
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Topics) != 2 || !st.Topics[1].Held || st.Topics[1].Owner != "team-<b>checkout</b>" || st.DeadLetters.Total != 2 ||
		len(st.DeadLetters.ByReason) != 1 || st.Relay.Ready || strings.Contains(body, "4111") || strings.Contains(body, "Secret/") {
		t.Errorf("/api/status: %s", body)
	}
}

// TestStatusIsReusedWithinRefresh: a page nobody reloads reads nothing;
// reloads within Refresh share one reading.
func TestStatusIsReusedWithinRefresh(t *testing.T) {
	now := time.Now()
	c := New(Config{Store: newStore(t), Refresh: time.Minute, Now: func() time.Time { return now }})
	a := c.Status(context.Background())
	if b := c.Status(context.Background()); b != a {
		t.Fatal("a second reading within Refresh")
	}
	now = now.Add(2 * time.Minute)
	if b := c.Status(context.Background()); b == a || !b.GeneratedAt.After(a.GeneratedAt) {
		t.Fatal("no new reading after Refresh")
	}
}

// TestPageShowsGroupedTopics: a topic of a topic group shows its group,
// its own events ("shared" where its rows share files with other topics)
// and this relay's position from its own txn in the group's table
// (appId/topic), not another topic's or another relay's.
func TestPageShowsGroupedTopics(t *testing.T) {
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	grouptest.Group(t, store, "m", "m.*")
	grouptest.Batch(t, store, "deltabus-main", 100, "m.a", "m.b", "orders")
	grouptest.Batch(t, store, "deltabus-main", 200, "m.a", "m.c")
	grouptest.Batch(t, store, "deltabus-main", 250, "m.c")
	grouptest.Batch(t, store, "deltabus-other", 300, "m.b")
	c := New(Config{Store: store, AppID: func() string { return "deltabus-main" }, Slot: "main", Version: "test"})
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	page, _ := get(t, srv.URL+"/")
	for _, want := range []string{
		`<tr data-topic="m.a" data-group="m"><td>m.a <span class="muted group">group m</span></td>`,
		`<tr data-topic="orders"><td>orders</td>`,
		`<td class="num events"><span title="0 in files of its own, and some of 4 in files shared with other topics of its group">shared</span></td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	body, _ := get(t, srv.URL+"/api/status")
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	got := map[string]Topic{}
	for _, tp := range st.Topics {
		got[tp.Topic] = tp
	}
	for topic, want := range map[string]struct {
		group, position string
		events, shared  int64
	}{
		"m.a":    {"m", "0/C8", 0, 4},
		"m.b":    {"m", "0/64", 1, 4}, // deltabus-other's commit at 0/12C is not this relay's position
		"m.c":    {"m", "0/FA", 1, 2},
		"orders": {"", "0/64", 1, 0},
	} {
		tp := got[topic]
		if tp.Group != want.group || tp.Position != want.position || tp.Events != want.events || tp.SharedEvents != want.shared || tp.Version < 0 {
			t.Errorf("%s: %+v, want group %q position %s events %d shared %d", topic, tp, want.group, want.position, want.events, want.shared)
		}
	}
}
