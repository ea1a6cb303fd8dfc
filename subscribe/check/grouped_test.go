package check

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/pgcheckpoint"
	"github.com/deltabus/deltabus/subscribe/retentiontest"
	"github.com/deltabus/deltabus/tests/grouptest"
	"github.com/deltabus/deltabus/tests/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func consumeAll(t *testing.T, root storage.Store, topic, group string, opts subscribe.Options) {
	t.Helper()
	if err := subscribe.Subscribe(context.Background(), root, topic, group, func(context.Context, *subscribe.Batch) error { return nil }, opts); err != nil {
		t.Fatal(err)
	}
}

// TestGroupedTopicRows: the rows of consumers of topics of one group's
// table: lag counted up to the newest version holding the topic (a
// consumer that read every event of its topic has none, however far the
// table went on), per source the topic's own txn (appId/topic) as the
// appId, headroom on the group table, and completeness and duplicates of
// the topic's events only.
func TestGroupedTopicRows(t *testing.T) {
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := grouptest.New(t, root, "m", []string{"m.*"}, grouptest.Options{})
	defer g.Close()
	g.Commit("m.a", "m.b", "m.a") // 1
	g.Commit("m.b")               // 2
	consumeAll(t, root, "m.a", "stopped", subscribe.Options{})
	consumeAll(t, root, "m.b", "stopped", subscribe.Options{})
	g.Commit("m.a", "m.c") // 3
	consumeAll(t, root, "m.a", "quiet", subscribe.Options{})
	g.Commit("m.b", "m.b") // 4
	g.Commit("m.c")        // 5

	db := pgtest.NewDB(t)
	pool, err := pgxpool.New(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cps, err := pgcheckpoint.Open(ctx, pool, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE b_events (event_id text)`); err != nil {
		t.Fatal(err)
	}
	h := func(ctx context.Context, b *subscribe.Batch) error {
		for _, e := range b.Events {
			if _, err := b.Tx.Exec(ctx, `INSERT INTO b_events VALUES ($1)`, e.ID); err != nil {
				return err
			}
		}
		return nil
	}
	if err := subscribe.Subscribe(ctx, root, "m.b", "pg", h, subscribe.Options{Checkpoints: cps}); err != nil {
		t.Fatal(err)
	}
	// One event applied twice, and an event of another topic of the group
	// (not the topic's: it counts nowhere).
	if _, err := pool.Exec(ctx, `INSERT INTO b_events VALUES ($1), ($2)`, g.IDs("m.b")[0], g.IDs("m.a")[0]); err != nil {
		t.Fatal(err)
	}

	cfg := Config{Store: root, CheckpointDSNs: []string{db.DSN}, Period: time.Minute, Periods: 120, Grace: time.Millisecond,
		Materialized: []Materialized{{Group: "pg", Table: "public.b_events", Column: "event_id"}},
		Now:          func() time.Time { return time.Now().Add(time.Hour) }} // every period of the events is closed
	rows, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Row{}
	for _, r := range rows {
		if r.Error != "" || r.Table != g.Table || r.LatestVersion != 5 || r.EarliestVersion != 0 || r.HeadroomVersions != r.Version {
			t.Errorf("row %+v", r)
		}
		got[r.Group+"/"+r.Topic] = r
	}
	if len(got) != 4 {
		t.Fatalf("%d rows: %v", len(got), rows)
	}
	src := func(r Row) SourceRead {
		t.Helper()
		if len(r.Sources) != 1 || r.Sources[0].AppID != grouptest.AppID {
			t.Fatalf("%s/%s sources %+v, want one, of %s", r.Group, r.Topic, r.Sources, grouptest.AppID)
		}
		return r.Sources[0]
	}
	lsn := func(topic string, i int) string { return lsnString(g.Events[topic][i].CommitLSN) }
	if r := got["stopped/m.a"]; r.Version != 3 || r.LagVersions != 1 || r.LagSeconds <= 0 ||
		src(r) != (SourceRead{AppID: grouptest.AppID, Read: lsn("m.a", 1), Latest: lsn("m.a", 2),
			LagBytes: g.Events["m.a"][2].CommitLSN - g.Events["m.a"][1].CommitLSN}) {
		t.Errorf("stopped consumer of m.a (version 3 holds its next event): %+v %+v", r, r.Sources)
	}
	if r := got["stopped/m.b"]; r.Version != 3 || r.LagVersions != 2 || src(r).Read != lsn("m.b", 1) || src(r).Latest != lsn("m.b", 3) {
		t.Errorf("stopped consumer of m.b (version 4 holds its next events): %+v %+v", r, r.Sources)
	}
	if r := got["quiet/m.a"]; r.Version != 4 || r.LagVersions != 0 || r.LagSeconds != 0 || src(r).LagBytes != 0 || src(r).Read != lsn("m.a", 2) {
		t.Errorf("consumer of m.a that read all its events (versions 4 and 5 hold none): %+v %+v", r, r.Sources)
	}
	r := got["pg/m.b"]
	if c := r.Completeness; r.Version != 6 || r.LagVersions != 0 || c == nil || c.Expected != 4 || c.Found != 4 || c.Ratio != 1 ||
		c.Rows != 5 || c.Duplicates != 1 || c.DuplicateRate != 0.2 {
		t.Errorf("materializing consumer of m.b: %+v, completeness %+v", r, r.Completeness)
	}
	var text bytes.Buffer
	if err := WriteText(&text, rows); err != nil || !strings.Contains(text.String(), "m.a (group m)") {
		t.Errorf("text: %v\n%s", err, text.String())
	}

	// Log clean-up of the group table passes the stopped consumers.
	retentiontest.CleanLog(t, g.Store(), 4)
	rows, err = Run(ctx, Config{Store: root})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		want := r.Version < 4
		if r.Error != "" || (r.HeadroomVersions < 0) != want || (len(r.Breaches) > 0) != want || r.EarliestVersion != 4 {
			t.Errorf("after clean-up at version 4: %+v", r)
		}
	}
}
