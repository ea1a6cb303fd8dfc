package reconcile

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// env is one test's source database (migrated outbox, relay slot) and
// local store.
type env struct {
	t    testing.TB
	db   *pgtest.DB
	root storage.Store
	base time.Time // start of the first window, well in the past
}

func newEnv(t testing.TB) *env {
	t.Helper()
	db := pgtest.NewDB(t)
	conn := db.Conn(t)
	if _, err := migrations.Apply(context.Background(), conn, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `SELECT pg_create_logical_replication_slot('deltabus', 'pgoutput')`)
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, db: db, root: root, base: time.Now().UTC().Truncate(time.Hour).Add(-4 * time.Hour)}
}

// events makes n events of topic with occurred_at spread over [from, from+span).
func events(topicName string, n int, from time.Time, span time.Duration) []outbox.Event {
	out := make([]outbox.Event, n)
	for i := range out {
		out[i] = outbox.Event{
			ID: uuid.NewString(), Topic: topicName, Key: fmt.Sprintf("k%d", i%7), Type: "created", SchemaVersion: 1,
			Payload: fmt.Sprintf(`{"n": %d}`, i), OccurredAt: from.Add(span * time.Duration(i) / time.Duration(n)).Truncate(time.Microsecond),
			CommitLSN: int64(1000 + i), Seq: 0, Xid: int64(700 + i), CommitTime: from,
		}
	}
	return out
}

// insertSource inserts the events as outbox rows.
func (e *env) insertSource(evs []outbox.Event) {
	e.t.Helper()
	ids, topics, occ := make([]string, len(evs)), make([]string, len(evs)), make([]time.Time, len(evs))
	for i, ev := range evs {
		ids[i], topics[i], occ[i] = ev.ID, ev.Topic, ev.OccurredAt
	}
	e.db.Exec(e.t, `INSERT INTO outbox (id, topic, key, type, payload, occurred_at)
		SELECT u.id::uuid, u.topic, 'k', 'created', '{}'::jsonb, u.occ
		FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS u(id, topic, occ)`, ids, topics, occ)
}

// commitLog writes the events as one commit of the topic table, with a txn
// for appID, files of at most fileRows rows.
func (e *env) commitLog(topicName string, evs []outbox.Event, appID string, fileRows int) {
	e.t.Helper()
	e.commitLogAs(topicName, evs, appID, "", fileRows)
}

// commitLogAs is commitLog with every row's source column set to source,
// as the relay of that source writes it ("" leaves it NULL, as releases
// before source identity did).
func (e *env) commitLogAs(topicName string, evs []outbox.Event, appID, source string, fileRows int) {
	e.t.Helper()
	ctx := context.Background()
	st := storage.Sub(e.root, topicName)
	w := topic.NewFileWriter(st, topic.FileOptions{MaxFileRows: fileRows, RowGroupRows: fileRows, Source: source})
	for i := range evs {
		if err := w.Append(&evs[i]); err != nil {
			e.t.Fatal(err)
		}
	}
	adds, err := w.Close(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	acts := make([]delta.Action, 0, len(adds)+1)
	for i := range adds {
		acts = append(acts, delta.Action{Add: &adds[i]})
	}
	acts = append(acts, delta.Action{Txn: &delta.Txn{AppID: appID, Version: evs[len(evs)-1].CommitLSN}})
	create := func() []delta.Action {
		md, p := topic.NewTableMetadata(topicName)
		return []delta.Action{{Protocol: &p}, {Metadata: &md}}
	}
	if _, err := appendCommit(ctx, st, acts, create); err != nil {
		e.t.Fatal(err)
	}
	if err := e.root.Put(ctx, topicsPrefix+topicName, []byte(topicName+"\n")); err != nil {
		e.t.Fatal(err)
	}
}

// advanceSlot keeps moving the slot to the current WAL position, as a
// relay that has committed everything would; it stops at test end.
func (e *env) advanceSlot() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	conn := e.db.Conn(e.t)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_, _ = conn.Exec(ctx, `SELECT pg_replication_slot_advance('deltabus', pg_current_wal_lsn())`)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	e.t.Cleanup(func() { cancel(); <-done })
}

// run reconciles the windows [base, base+hours h) with 1h windows.
func (e *env) run(hours int, mod func(*Options)) *Report {
	e.t.Helper()
	o := Options{From: e.base, To: e.base.Add(time.Duration(hours) * time.Hour), Window: time.Hour, DurableWait: 10 * time.Second}
	if mod != nil {
		mod(&o)
	}
	rep, err := Run(context.Background(), e.db.DSN, e.root, o, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

func ids(evs []outbox.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// topicsPrefix is where the relay registers topic tables (see relay.ListTopics).
const topicsPrefix = "_deltabus/topics/"
