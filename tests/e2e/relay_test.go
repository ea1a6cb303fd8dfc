package e2e

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/relay"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/verify"
)

// runRelay runs a relay in-process until the test ends.
func runRelay(t testing.TB, dsn, storeURL string, store storage.Store) (stop func() error) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r, _, err := daemon.New(context.Background(), relay.Config{Source: dsn, Store: storeURL, BatchMaxDelay: 20 * time.Millisecond},
		daemon.Options{Log: log, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	select {
	case <-r.Started():
	case err := <-errc:
		cancel()
		t.Fatalf("relay did not start: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("relay did not start within a minute")
	}
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-errc
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// TestPoisonRowsGoToDeadLetter: rows that cannot become events land in
// _dead_letter with a reason, and the events around them still flow.
func TestPoisonRowsGoToDeadLetter(t *testing.T) {
	db := setup(t)
	url, store := localStore(t)
	stop := runRelay(t, db.DSN, url, store)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('orders', 'o1', 'Created', '{"n":1}')`)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('Bad/Topic', 'x', 'Oops', '{}')`)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('_internal', 'x', 'Oops', '{}')`)
	db.Exec(t, `UPDATE outbox SET payload = '{"n":2}' WHERE key = 'o1'`)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('orders', 'o2', 'Created', '{"n":3}')`)
	db.Exec(t, `DELETE FROM outbox WHERE key = 'x'`)
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	orders, err := verify.ReadTopic(context.Background(), store, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(orders) != 2 {
		t.Fatalf("orders has %d rows, want 2", len(orders))
	}
	dl, err := verify.ReadTopic(context.Background(), store, outbox.DeadLetterTopic)
	if err != nil {
		t.Fatal(err)
	}
	if len(dl) != 3 { // two bad topics and one UPDATE
		t.Fatalf("_dead_letter has %d rows, want 3", len(dl))
	}
	reasons := deadLetterReasons(t, store)
	for _, want := range []string{`"Bad/Topic"`, `"_internal"`, "UPDATE of outbox row"} {
		if !strings.Contains(strings.Join(reasons, "\n"), want) {
			t.Errorf("no dead letter reason mentions %s: %q", want, reasons)
		}
	}
}

// TestPostgresRestartMidStream: `pg_ctl restart -m fast` while producers
// write; the relay reconnects by itself, nothing lost or duplicated.
func TestPostgresRestartMidStream(t *testing.T) {
	srv := pgtest.NewServer(t)
	dsn := srv.DSN("postgres")
	db := &pgtest.DB{Name: "postgres", DSN: dsn, ReplDSN: dsn + "&replication=database"}
	conn := db.Conn(t)
	migrate(t, conn)
	truth := newTruthSlot(t, db, "deltabus")
	url, store := localStore(t)
	stop := runRelay(t, dsn, url, store)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var prod producers
	produced := make(chan struct{})
	go func() { prod.run(ctx, t, dsn, 2, 6000); close(produced) }()
	time.Sleep(700 * time.Millisecond)
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL restarted after %d events", prod.written.Load())
	<-produced
	waitDrained(t, dsn, "deltabus", 2*time.Minute)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkAgainstTruth(t, store, truth.read(t))
}

// TestSecondRelayOnSameSlot: a second relay exits with a clear error; with
// --standby it waits and takes over when the first dies, without double
// writes.
func TestSecondRelayOnSameSlot(t *testing.T) {
	db := setup(t)
	url, store := localStore(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url}
	first := startRelay(t, env)
	waitSlotActive(t, db.DSN, "deltabus", first)

	second := startRelay(t, env)
	select {
	case err := <-second.doneOnce():
		if err == nil {
			t.Fatal("second relay exited 0")
		}
		if out := second.output(); !strings.Contains(out, "in use") || !strings.Contains(out, "--standby") {
			t.Fatalf("second relay's error does not say the slot is in use: %s", out)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("second relay did not exit")
	}

	standby := startRelay(t, env, "--standby")
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) SELECT 'orders', 'k', 'T', '{}' FROM generate_series(1, 100)`)
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	first.kill()
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) SELECT 'orders', 'k', 'T', '{}' FROM generate_series(1, 100)`)
	waitSlotActive(t, db.DSN, "deltabus", standby)
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	if err := standby.stop(time.Minute); err != nil {
		t.Fatalf("standby did not stop cleanly: %v\n%s", err, standby.tail())
	}
	rows, err := verify.ReadTopic(context.Background(), store, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 200 {
		t.Fatalf("orders has %d rows, want 200", len(rows))
	}
}

// TestForeignTableAtTopicPathGoesToDeadLetter: a topic whose path already
// holds a table DeltaBus did not write must not block the stream: its events
// go to _dead_letter with the reason.
func TestForeignTableAtTopicPathGoesToDeadLetter(t *testing.T) {
	db := setup(t)
	url, store := localStore(t)
	foreign := `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}`
	err := delta.CreateTable(context.Background(), storage.Sub(store, "orders"),
		delta.Metadata{SchemaString: foreign}, delta.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := runRelay(t, db.DSN, url, store)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('orders', 'o1', 'Created', '{}'), ('payments', 'p1', 'Paid', '{}')`)
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	payments, err := verify.ReadTopic(context.Background(), store, "payments")
	if err != nil || len(payments) != 1 {
		t.Fatalf("payments: %d rows, %v; want 1", len(payments), err)
	}
	dl, err := verify.ReadTopic(context.Background(), store, outbox.DeadLetterTopic)
	if err != nil || len(dl) != 1 {
		t.Fatalf("_dead_letter: %d rows, %v; want the orders event", len(dl), err)
	}
}

// TestStatusShowsSlotAndTopics: `relay status --json` reports the slot's
// position and WAL held back, and every topic's version and txn LSN.
func TestStatusShowsSlotAndTopics(t *testing.T) {
	db := setup(t)
	url, store := localStore(t)
	stop := runRelay(t, db.DSN, url, store)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('orders', 'o1', 'Created', '{}'), ('payments', 'p1', 'Paid', '{}')`)
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url}, "status", "--json")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	var rep struct {
		Slot struct {
			Exists    bool
			WALStatus string
		} `json:"slot"`
		Topics []struct {
			Topic   string `json:"topic"`
			Version int64  `json:"version"`
			TxnLSN  string `json:"txnLsn"`
			Records int64  `json:"records"`
		} `json:"topics"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	if !rep.Slot.Exists || len(rep.Topics) != 2 {
		t.Fatalf("status: %s", stdout)
	}
	for _, tp := range rep.Topics {
		if tp.Version < 1 || tp.TxnLSN == "" || tp.Records != 1 {
			t.Errorf("topic %s: %+v", tp.Topic, tp)
		}
	}
}

// deadLetterReasons reads the reason and raw row of every dead letter.
func deadLetterReasons(t testing.TB, root storage.Store) []string {
	t.Helper()
	ctx := context.Background()
	st := storage.Sub(root, outbox.DeadLetterTopic)
	var out []string
	err := delta.ReadChanges(ctx, st, 0, -1, func(cf delta.ChangeFile) error {
		return topic.ReadDeadLetters(ctx, st, delta.Add{Path: cf.Path}, func(d outbox.DeadLetter) error {
			if d.Reason == "" || d.RawRow == "" || d.SourceTable != "public.outbox" {
				t.Errorf("dead letter without reason, raw row or source table: %+v", d)
			}
			out = append(out, d.Reason)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
