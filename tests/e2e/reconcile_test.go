package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// TestReconcileNamesRowsDeletedBehindTheRelay: outbox rows deleted by hand
// after the relay published them are events the log holds and the source
// lacks; `relay reconcile` (beside the running relay, which confirms the
// positions it samples) exits 1 and names exactly those ids.
func TestReconcileNamesRowsDeletedBehindTheRelay(t *testing.T) {
	db := setup(t)
	url, _ := localStore(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url}
	p := startRelay(t, env)
	waitSlotActive(t, db.DSN, "deltabus", p)
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) SELECT 'orders', 'k' || g, 'Created', '{}' FROM generate_series(1, 100) g`)
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	conn := db.Conn(t)
	rows, err := conn.Query(context.Background(), `DELETE FROM outbox WHERE id IN (SELECT id FROM outbox ORDER BY id LIMIT 7) RETURNING id::text`)
	if err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, id)
	}
	if rows.Err() != nil || len(deleted) != 7 {
		t.Fatalf("deleted %d rows: %v", len(deleted), rows.Err())
	}
	time.Sleep(time.Second) // the windows of the events close
	code, stdout, stderr := runCLI(t, env, append(reconcileRecent, "--json")...)
	if err := p.stop(time.Minute); err != nil {
		t.Fatalf("relay did not stop: %v", err)
	}
	if code != 1 {
		t.Fatalf("reconcile: exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	var rep struct {
		Results []struct {
			Topic      string   `json:"topic"`
			Unexpected []string `json:"unexpected"`
			Phantoms   []string `json:"phantoms"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("reconcile --json: %v\n%s", err, stdout)
	}
	var named []string
	for _, r := range rep.Results {
		named = append(named, r.Unexpected...)
		if len(r.Phantoms) > 0 {
			t.Fatalf("rows deleted by hand reported as phantoms: %v", r.Phantoms)
		}
	}
	slices.Sort(named)
	slices.Sort(deleted)
	if !slices.Equal(named, deleted) {
		t.Fatalf("reconcile names %v in the log and not in the source; deleted %v", named, deleted)
	}
}
