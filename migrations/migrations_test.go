package migrations_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func messages(r migrations.Report) []string {
	var out []string
	for _, it := range r.Items {
		out = append(out, it.Message)
	}
	return out
}

func wantMessages(t *testing.T, r migrations.Report, want ...string) {
	t.Helper()
	got := messages(r)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("report:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestApplyCreatesThenReportsNothingToDo(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, conn := testCtx(t), db.Conn(t)
	rep, err := migrations.Apply(ctx, conn, migrations.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantMessages(t, rep,
		"schema public already exists",
		"created table public.outbox",
		"created index public.outbox_topic_occurred_at_idx on public.outbox (topic, occurred_at)",
		"table public.outbox already has replica identity default",
		"created publication deltabus for table public.outbox")
	if !rep.Changed() {
		t.Error("first Apply reports no change")
	}
	rep, err = migrations.Apply(ctx, conn, migrations.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantMessages(t, rep,
		"schema public already exists",
		"table public.outbox already exists",
		"index public.outbox_topic_occurred_at_idx already exists",
		"table public.outbox already has replica identity default",
		"publication deltabus already includes public.outbox")
	if rep.Changed() {
		t.Error("second Apply reports a change")
	}
	if err := migrations.Check(ctx, conn, migrations.Options{}); err != nil {
		t.Fatalf("Check after Apply: %v", err)
	}

	// The table has the documented shape and defaults.
	var id, headers *string
	var sv int
	var at time.Time
	err = conn.QueryRow(ctx, `INSERT INTO public.outbox (topic, key, type, payload)
		VALUES ('orders', 'k', 'T', '{}') RETURNING id::text, schema_version, headers::text, occurred_at`).Scan(&id, &sv, &headers, &at)
	if err != nil || id == nil || len(*id) != 36 || sv != 1 || headers != nil || time.Since(at) > time.Minute {
		t.Fatalf("insert with defaults: id %v, schema_version %d, headers %v, occurred_at %v, err %v", id, sv, headers, at, err)
	}
	for _, bad := range []string{
		`INSERT INTO public.outbox (topic, key, type) VALUES ('t', 'k', 'T')`,
		`INSERT INTO public.outbox (topic, key, type, payload) VALUES ('t', 'k', 'T', 'not json')`,
	} {
		if _, err := conn.Exec(ctx, bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func TestApplyConcurrently(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx := testCtx(t)
	const n = 4
	conns := make([]*pgx.Conn, n)
	for i := range conns {
		conns[i] = db.Conn(t)
	}
	reports := make([]migrations.Report, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { reports[i], errs[i] = migrations.Apply(ctx, conns[i], migrations.Options{}) })
	}
	wg.Wait()
	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Apply %d: %v", i, errs[i])
		}
		if reports[i].Changed() {
			created++
		}
	}
	if created != 1 {
		t.Errorf("%d of %d concurrent Apply calls changed something, want exactly 1", created, n)
	}
}

func TestApplySharesPublicationAcrossSchemas(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, conn := testCtx(t), db.Conn(t)
	if _, err := migrations.Apply(ctx, conn, migrations.Options{Schema: "billing"}); err != nil {
		t.Fatal(err)
	}
	rep, err := migrations.Apply(ctx, conn, migrations.Options{Schema: "shipping", Table: "events"})
	if err != nil {
		t.Fatal(err)
	}
	wantMessages(t, rep,
		"created schema shipping",
		"created table shipping.events",
		"created index shipping.events_topic_occurred_at_idx on shipping.events (topic, occurred_at)",
		"table shipping.events already has replica identity default",
		"added shipping.events to publication deltabus")
	rows, _ := conn.Query(ctx, `SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = 'deltabus' ORDER BY 1`)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || strings.Join(tables, ",") != "billing.outbox,shipping.events" {
		t.Fatalf("publication tables = %v, %v", tables, err)
	}
	if err := migrations.Check(ctx, conn, migrations.Options{}); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

func TestApplyFixesReplicaIdentity(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, conn := testCtx(t), db.Conn(t)
	if _, err := migrations.Apply(ctx, conn, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `ALTER TABLE public.outbox REPLICA IDENTITY FULL`)
	rep, err := migrations.Apply(ctx, conn, migrations.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := messages(rep)[3]; got != "set replica identity default on public.outbox (was full)" {
		t.Errorf("replica identity item = %q", got)
	}
}

func TestApplyRefusesForeignTable(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, conn := testCtx(t), db.Conn(t)
	db.Exec(t, `CREATE TABLE public.outbox (id bigint primary key, body text)`)
	_, err := migrations.Apply(ctx, conn, migrations.Options{})
	want := `table public.outbox exists but is not a DeltaBus outbox: missing column "topic" (also missing: "key", "type", "schema_version", "payload", "headers", "occurred_at")`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Apply over a foreign table: %v\nwant it to contain %s", err, want)
	}
	var pubs int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_publication`).Scan(&pubs); err != nil || pubs != 0 {
		t.Errorf("a failed Apply left %d publications (%v)", pubs, err)
	}
}

func TestApplyAndCheckDebeziumTable(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, conn := testCtx(t), db.Conn(t)
	db.Exec(t, `CREATE SCHEMA legacy; CREATE TABLE legacy.outboxevent (id uuid primary key, aggregatetype varchar(255) not null,
		aggregateid varchar(255) not null, type varchar(255) not null, payload jsonb)`)
	ms := outbox.Mappings{Tables: map[string]outbox.Mapping{"legacy.outboxevent": outbox.DebeziumMapping()}}
	opts := migrations.Options{Schema: "legacy", Table: "outboxevent", Mappings: ms}
	rep, err := migrations.Apply(ctx, conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	wantMessages(t, rep,
		"schema legacy already exists",
		"table legacy.outboxevent already exists",
		"created index legacy.outboxevent_aggregatetype_idx on legacy.outboxevent (aggregatetype)",
		"table legacy.outboxevent already has replica identity default",
		"created publication deltabus for table legacy.outboxevent")
	if err := migrations.Check(ctx, conn, migrations.Options{Mappings: ms}); err != nil {
		t.Fatalf("Check with the Debezium mapping: %v", err)
	}
	err = migrations.Check(ctx, conn, migrations.Options{})
	if err == nil || !strings.Contains(err.Error(), `table legacy.outboxevent in publication deltabus is not a DeltaBus outbox: missing column "topic"`) {
		t.Fatalf("Check without the mapping: %v", err)
	}
	if _, err := migrations.Apply(ctx, conn, migrations.Options{Schema: "legacy", Table: "other", Mappings: outbox.Mappings{Default: outbox.DebeziumMapping()}}); err == nil ||
		!strings.Contains(err.Error(), "Apply creates only the DeltaBus layout") {
		t.Fatalf("Apply of a missing Debezium table: %v", err)
	}
}

func TestCheck(t *testing.T) {
	db := pgtest.NewDB(t)
	ctx, conn := testCtx(t), db.Conn(t)
	check := func() string {
		t.Helper()
		if err := migrations.Check(ctx, conn, migrations.Options{}); err != nil {
			return err.Error()
		}
		return ""
	}
	if got, want := check(), `publication deltabus does not exist; run "relay migrate" to create it`; got != want {
		t.Errorf("no publication: %q\nwant %q", got, want)
	}
	db.Exec(t, `CREATE PUBLICATION deltabus`)
	if got, want := check(), `publication deltabus includes no tables; run "relay migrate" to add the outbox table`; got != want {
		t.Errorf("empty publication: %q\nwant %q", got, want)
	}
	if _, err := migrations.Apply(ctx, conn, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	if got := check(); got != "" {
		t.Errorf("after Apply: %s", got)
	}
	db.Exec(t, `CREATE TABLE public.orders (id uuid primary key, total numeric); ALTER PUBLICATION deltabus ADD TABLE public.orders`)
	want := `table public.orders in publication deltabus is not a DeltaBus outbox: missing column "topic" (also missing: "key", "type", "schema_version", "payload", "headers", "occurred_at"); remove it from the publication or map its columns`
	if got := check(); got != want {
		t.Errorf("orders in publication: %q\nwant %q", got, want)
	}
	db.Exec(t, `ALTER PUBLICATION deltabus DROP TABLE public.orders`)
	db.Exec(t, `ALTER PUBLICATION deltabus SET TABLE public.outbox (id, topic, key, type, schema_version, payload, occurred_at)`)
	if got, want := check(), `publication deltabus publishes a column list of public.outbox without "headers"; publish all its columns`; got != want {
		t.Errorf("column list: %q\nwant %q", got, want)
	}
	db.Exec(t, `ALTER PUBLICATION deltabus SET TABLE public.outbox WHERE (topic <> 'secret')`)
	if got := check(); !strings.HasPrefix(got, `publication deltabus filters the rows of public.outbox (WHERE (topic <> 'secret'::text))`) {
		t.Errorf("row filter: %q", got)
	}
	db.Exec(t, `ALTER PUBLICATION deltabus SET TABLE public.outbox`)
	db.Exec(t, `ALTER PUBLICATION deltabus SET (publish = 'update, delete')`)
	if got := check(); !strings.HasPrefix(got, "publication deltabus does not publish INSERTs") {
		t.Errorf("no inserts: %q", got)
	}
}

func TestCheckWALLevel(t *testing.T) {
	srv := pgtest.NewServer(t, "wal_level = replica")
	ctx := testCtx(t)
	conn, err := pgx.Connect(ctx, srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	err = migrations.Check(ctx, conn, migrations.Options{})
	want := `wal_level is "replica"; set wal_level = logical in postgresql.conf and restart PostgreSQL`
	if err == nil || err.Error() != want {
		t.Fatalf("Check = %v\nwant %s", err, want)
	}
}
