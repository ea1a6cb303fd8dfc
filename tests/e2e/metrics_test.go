package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/metricstest"
)

// TestMetricsNamesUnchanged scrapes the /metrics of a running relay process
// that bootstrapped existing rows, streamed events and a poison row, and
// holds a topic whose table was deleted: every family it exposes (relay,
// bootstrap, maintenance, Go runtime and process) has the name, type, help
// text and label names of testdata/relay_metrics.golden, taken from the
// relay before its metrics moved to OpenTelemetry.
func TestMetricsNamesUnchanged(t *testing.T) {
	db := setup(t)
	url, store := localStore(t)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('orders', 'o0', 'Created', '{"n":0}'), ('payments', 'p0', 'Paid', '{"n":0}')`)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('Bad/Topic', 'x', 'Oops', '{}')`)
	addr := freeAddr(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url}
	p := startRelay(t, env, "--batch-max-delay", "20ms", "--metrics-addr", addr)
	waitSlotActive(t, db.DSN, "deltabus", p)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) SELECT t, 'k' || i, 'Created', '{}' FROM generate_series(1, 50) i, unnest(ARRAY['orders', 'payments']) t`)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('_internal', 'x', 'Oops', '{}')`)
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	deleteAll(t, storage.Sub(store, "payments"))
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('payments', 'p9', 'Paid', '{}')`)
	eventually(t, time.Minute, "payments held", func() bool {
		st := heldState(context.Background(), store, "payments")
		return st.Paused == catalog.HoldMissingTable
	})
	mfs, err := metricstest.Scrape("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metricstest.Golden(t, "testdata/relay_metrics.golden", metricstest.Shape(mfs))
	for name, want := range map[string]float64{"deltabus_events_committed_total": 50, "deltabus_bootstrap_events_added_total": 1} {
		for _, topic := range []string{"orders", "payments"} {
			if got := metricstest.Value(mfs[name], "topic", topic); got != want {
				t.Errorf("%s{topic=%q} = %v, want %v", name, topic, got, want)
			}
		}
	}
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.tail())
	}
}
