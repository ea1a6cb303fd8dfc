package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/metricstest"
)

// TestMetricsNamesUnchanged scrapes the /metrics of a running relay process
// that bootstrapped existing rows, streamed events and a poison row, and
// holds a topic whose table was deleted: every family it exposes (relay,
// bootstrap, maintenance, Go runtime and process) has the name, type, help
// text and label names of testdata/relay_metrics.golden (the slot gauges
// included, once the relay has read its slot), taken from the
// relay before its metrics moved to OpenTelemetry.
func TestMetricsNamesUnchanged(t *testing.T) {
	db := setup(t)
	// A bounded slot, so the WAL headroom gauge is there too (the cluster's
	// default is unlimited). Top-level tests that are not parallel run
	// alone, and the setting is undone before the others run.
	db.Exec(t, `ALTER SYSTEM SET max_slot_wal_keep_size = '4GB'`)
	db.Exec(t, `SELECT pg_reload_conf()`)
	t.Cleanup(func() {
		db.Exec(t, `ALTER SYSTEM RESET max_slot_wal_keep_size`)
		db.Exec(t, `SELECT pg_reload_conf()`)
	})
	url, store := localStore(t)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('orders', 'o0', 'Created', '{"n":0}'), ('payments', 'p0', 'Paid', '{"n":0}')`)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('Bad/Topic', 'x', 'Oops', '{}')`)
	addr := freeAddr(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url}
	// A pacing threshold of one file: orders holds more by the end, so its
	// pace gauge is positive (checkTablePace).
	p := startRelay(t, env, "--batch-max-delay", "20ms", "--metrics-addr", addr, "--state-pace-files", "1")
	waitSlotActive(t, db.DSN, "deltabus", p)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) SELECT t, 'k' || i, 'Created', '{}' FROM generate_series(1, 50) i, unnest(ARRAY['orders', 'payments']) t`)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('orders', 'o1', 'Created', '{}')`)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('orders', 'o2', 'Created', '{}')`)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('_internal', 'x', 'Oops', '{}')`)
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	deleteAll(t, storage.Sub(store, "payments"))
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('payments', 'p9', 'Paid', '{}')`)
	eventually(t, time.Minute, "payments held", func() bool {
		st := heldState(context.Background(), store, "payments")
		return st.Paused == catalog.HoldMissingTable
	})
	var mfs map[string]*dto.MetricFamily
	eventually(t, 30*time.Second, "the slot gauges", func() bool {
		var err error
		if mfs, err = metricstest.Scrape("http://" + addr + "/metrics"); err != nil {
			t.Fatal(err)
		}
		return mfs["deltabus_slot_active"] != nil && mfs["deltabus_slot_wal_headroom_bytes"] != nil
	})
	metricstest.Golden(t, "testdata/relay_metrics.golden", metricstest.Shape(mfs))
	for name, want := range map[string][2]float64{"deltabus_events_committed_total": {52, 50}, "deltabus_bootstrap_events_added_total": {1, 1}} {
		for i, topic := range []string{"orders", "payments"} {
			if got := metricstest.Value(mfs[name], "topic", topic); got != want[i] {
				t.Errorf("%s{topic=%q} = %v, want %v", name, topic, got, want[i])
			}
		}
	}
	checkTableState(t, mfs["deltabus_table_state_files"], store, "orders")
	checkTablePace(t, mfs["deltabus_table_state_pace_seconds"], store, "orders", 1)
	// A streaming relay heard from its server within its stream timeout,
	// and `relay status` shows both sides' view of the stream.
	if age := metricstest.Value(mfs["deltabus_stream_last_message_age_seconds"], "slot", "deltabus"); age < 0 || age > 30 {
		t.Errorf("deltabus_stream_last_message_age_seconds{slot=deltabus} = %v while streaming", age)
	}
	code, stdout, stderr := runCLI(t, env, "status", "--json", "--relay-addr", addr)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	var rep struct {
		Slot struct {
			ReplyAge *float64 `json:"holderReplyAgeSeconds"`
		} `json:"slot"`
		StreamAge *float64 `json:"relayStreamMessageAgeSeconds"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	if rep.Slot.ReplyAge == nil || *rep.Slot.ReplyAge > 30 || rep.StreamAge == nil || *rep.StreamAge > 30 {
		t.Errorf("status of a streaming relay: holder's reply age %v, relay's stream message age %v; want both, seconds old:\n%s",
			rep.Slot.ReplyAge, rep.StreamAge, stdout)
	}
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.tail())
	}
}

// checkTableState: the relay's gauge of a table's in-memory state counts
// what the table's log holds, read back by a handle of its own: active
// files (one per commit, nothing compacted yet) and tombstones.
func checkTableState(t *testing.T, mf *dto.MetricFamily, store storage.Store, table string) {
	t.Helper()
	tbl, err := delta.OpenTable(context.Background(), storage.Sub(store, table), delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"active": float64(tbl.NumFiles()), "tombstone": float64(tbl.NumTombstones())}
	got := map[string]float64{}
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["table"] == table {
			got[labels["kind"]] = m.GetGauge().GetValue()
		}
	}
	if want["active"] < 1 || got["active"] != want["active"] || got["tombstone"] != want["tombstone"] {
		t.Errorf("deltabus_table_state_files{table=%q} = %v; the table's log holds %v", table, got, want)
	}
}

// checkTablePace: the relay's pace gauge of a table is the interval the
// files its log holds call for past the threshold: a second per threshold
// files beyond it.
func checkTablePace(t *testing.T, mf *dto.MetricFamily, store storage.Store, table string, threshold int) {
	t.Helper()
	tbl, err := delta.OpenTable(context.Background(), storage.Sub(store, table), delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	files := tbl.NumFiles() + tbl.NumTombstones()
	want := min(float64(files-threshold)/float64(threshold), 5)
	if got := metricstest.Value(mf, "table", table); files <= threshold || got != want {
		t.Errorf("deltabus_table_state_pace_seconds{table=%q} = %v; its %d files past a threshold of %d call for %v",
			table, got, files, threshold, want)
	}
}
