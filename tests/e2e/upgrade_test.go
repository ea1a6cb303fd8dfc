package e2e

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/verify"
)

// legacyMaxLSN is the highest position the fixture store records
// (testdata/legacy-store.md).
const legacyMaxLSN = "0/1957178"

var legacyTopics = []string{"orders", "payments", "users", "_dead_letter"}

// legacySource is a cluster of its own with the outbox migrated and its
// WAL past every position of the fixture store, and a copy of the store.
type legacySource struct {
	srv   *pgtest.Server
	db    *pgtest.DB
	dir   string
	url   string
	store storage.Store
	env   []string
	// before is what each topic held in the fixture, in order.
	before map[string][]string
}

func newLegacySource(t *testing.T, marker func(m map[string]any, db *pgtest.DB)) *legacySource {
	t.Helper()
	srv := pgtest.NewServer(t)
	dsn := srv.DSN("postgres")
	db := &pgtest.DB{Name: "postgres", DSN: dsn, ReplDSN: dsn + "&replication=database"}
	migrate(t, db.Conn(t))
	ls := &legacySource{srv: srv, db: db, dir: t.TempDir(), before: map[string][]string{}}
	copyDir(t, "testdata/legacy-store", ls.dir)
	ls.url = "file://" + ls.dir
	var err error
	if ls.store, err = storage.NewLocal(ls.dir); err != nil {
		t.Fatal(err)
	}
	ls.env = []string{"DELTABUS_SOURCE=" + dsn, "DELTABUS_STORE=" + ls.url}
	path := filepath.Join(ls.dir, "_deltabus", "relays", "deltabus-deltabus.json")
	var m map[string]any
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		t.Fatal(err)
	}
	marker(m, db)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tp := range legacyTopics {
		ls.before[tp] = topicIDs(t, ls.store, tp)
	}
	// The WAL of a fresh cluster is behind the fixture's positions.
	conn := db.Conn(t)
	ctx := context.Background()
	db.Exec(t, "CREATE TABLE filler (x int)")
	for {
		var past bool
		if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn() > $1::pg_lsn + 16777216", legacyMaxLSN).Scan(&past); err != nil {
			t.Fatal(err)
		}
		if past {
			break
		}
		db.Exec(t, "INSERT INTO filler VALUES (1)")
		db.Exec(t, "SELECT pg_switch_wal()")
	}
	return ls
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func topicIDs(t *testing.T, store storage.Store, tp string) []string {
	t.Helper()
	rows, err := verify.ReadTopic(context.Background(), store, tp)
	if err != nil {
		t.Fatalf("read %s: %v", tp, err)
	}
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids
}

// insertEvents writes n events over the fixture's topics in its own
// transactions and returns their ids by topic, in commit order.
func (ls *legacySource) insertEvents(t *testing.T, n int) map[string][]string {
	t.Helper()
	ctx := context.Background()
	conn := ls.db.Conn(t)
	out := map[string][]string{}
	for i := range n {
		tp := legacyTopics[i%3]
		var id string
		if err := conn.QueryRow(ctx, `INSERT INTO outbox (topic, key, type, payload) VALUES ($1, 'k', 'created', '{}') RETURNING id::text`, tp).Scan(&id); err != nil {
			t.Fatal(err)
		}
		out[tp] = append(out[tp], id)
	}
	return out
}

// TestUpgradeLegacyStore: a store written by the release before source
// identity. A relay on the source its marker names takes its progress over
// (appId deltabus-deltabus, the old rebuild state at its per-topic key):
// the old events stay as they are and new ones follow, each once, with no
// re-snapshot.
func TestUpgradeLegacyStore(t *testing.T) {
	t.Parallel()
	ls := newLegacySource(t, func(m map[string]any, db *pgtest.DB) {
		m["systemId"], m["database"] = db.SystemID(t), "postgres"
	})
	ls.db.Exec(t, "SELECT pg_create_logical_replication_slot('deltabus', 'pgoutput')")
	added := ls.insertEvents(t, 30)
	p := startRelay(t, ls.env, "--batch-max-delay", "20ms")
	waitDrained(t, ls.db.DSN, "deltabus", 2*time.Minute)
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("relay: %v\n%s", err, p.tail())
	}
	for _, tp := range legacyTopics {
		want := append(slices.Clone(ls.before[tp]), added[tp]...)
		if got := topicIDs(t, ls.store, tp); !slices.Equal(got, want) {
			t.Errorf("topic %s: %d rows %q\nwant the fixture's %d then the %d new ones: %q", tp, len(got), got, len(ls.before[tp]), len(added[tp]), want)
		}
	}
	if !strings.Contains(p.output(), "legacy appId") || strings.Contains(p.output(), "first start") {
		t.Errorf("the relay did not take the legacy progress over:\n%s", p.tail())
	}
	markers, err := catalog.ListMarkers(context.Background(), ls.store)
	if err != nil || len(markers) != 1 || markers[0].AppID != "deltabus-deltabus" {
		t.Errorf("markers %+v %v: want the legacy one alone", markers, err)
	}
}

// TestUpgradeLegacyStoreOfAnotherSource: the fixture's marker names another
// cluster; a relay with the same slot name on this one leaves that
// progress alone and starts as a new source, its events beside the old.
func TestUpgradeLegacyStoreOfAnotherSource(t *testing.T) {
	t.Parallel()
	ls := newLegacySource(t, func(map[string]any, *pgtest.DB) {})
	added := ls.insertEvents(t, 30)
	p := startRelay(t, ls.env, "--batch-max-delay", "20ms")
	waitSlotActive(t, ls.db.DSN, "deltabus", p)
	more := ls.insertEvents(t, 9)
	waitDrained(t, ls.db.DSN, "deltabus", 2*time.Minute)
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("relay: %v\n%s", err, p.tail())
	}
	for _, tp := range legacyTopics {
		want := append(append(slices.Clone(ls.before[tp]), added[tp]...), more[tp]...)
		if got := topicIDs(t, ls.store, tp); !slices.Equal(got, want) {
			t.Errorf("topic %s: rows %q\nwant %q", tp, got, want)
		}
	}
	appID := ls.db.AppID(t, "deltabus")
	if _, ok, err := catalog.ReadMarker(context.Background(), ls.store, appID); err != nil || !ok {
		t.Errorf("no marker of this source %s: %v", appID, err)
	}
}

// TestUnprovableProgressIsRefused: a legacy marker without a system
// identifier cannot be told to be this source's or not: the relay exits
// non-zero with one line naming both, and writes nothing.
func TestUnprovableProgressIsRefused(t *testing.T) {
	t.Parallel()
	ls := newLegacySource(t, func(m map[string]any, _ *pgtest.DB) { delete(m, "systemId") })
	ls.db.Exec(t, "SELECT pg_create_logical_replication_slot('deltabus', 'pgoutput')")
	before := listing(t, ls.dir)
	code, stdout, stderr := runCLI(t, ls.env, "run", "--metrics-addr", "")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code == 0 || len(lines) != 1 || !strings.Contains(stderr, "deltabus-deltabus") || !strings.Contains(stderr, ls.db.SystemID(t)) {
		t.Fatalf("relay run: exit %d, stderr %q (stdout %q): want one line naming the legacy relay and this source", code, stderr, stdout)
	}
	if after := listing(t, ls.dir); !slices.Equal(before, after) {
		t.Fatalf("the refused relay wrote to the store:\nbefore %q\nafter  %q", before, after)
	}
}

func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}
