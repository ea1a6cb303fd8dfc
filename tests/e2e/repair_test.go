package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/republish"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/tests/s3test"
	"github.com/deltabus/deltabus/verify"
)

// reconcileRepair is `relay reconcile --repair` over the recent past, in
// one-second windows that close at once.
var reconcileRepair = []string{"reconcile", "--repair", "--last", "10m", "--window", "1s", "--lateness", "1ms", "--json"}

// writeBatch inserts n events of topic in one transaction and returns
// their ids in insertion order.
func writeBatch(t testing.TB, db *pgtest.DB, topic string, n int) []string {
	t.Helper()
	return insertedIDs(t, db, fmt.Sprintf(`INSERT INTO outbox (topic, key, type, payload, occurred_at)
		SELECT '%s', 'k' || g, 'Created', json_build_object('n', g), now() + g * interval '1 microsecond' FROM generate_series(1, %d) g RETURNING id::text`, topic, n))
}

// insertedIDs runs an INSERT ... RETURNING id::text and returns the ids.
func insertedIDs(t testing.TB, db *pgtest.DB, insert string) []string {
	t.Helper()
	return queryStrings(t, db.DSN, insert)
}

// publicationGap writes n events of topic while the outbox is out of the
// publication, as a user altering it would: the relay never sees them.
func publicationGap(t testing.TB, db *pgtest.DB, topic string, n int) []string {
	t.Helper()
	db.Exec(t, `ALTER PUBLICATION deltabus DROP TABLE outbox`)
	ids := writeBatch(t, db, topic, n)
	db.Exec(t, `ALTER PUBLICATION deltabus ADD TABLE outbox`)
	return ids
}

// repairReport is what the tests read of `reconcile --repair --json`.
type repairReport struct {
	Results []struct {
		Topic           string `json:"topic"`
		Status          string `json:"status"`
		MissingCount    int64  `json:"missingCount"`
		DuplicateCount  int64  `json:"duplicateCount"`
		UnexpectedCount int64  `json:"unexpectedCount"`
	} `json:"results"`
	Repair struct {
		Found struct {
			Results []struct {
				Topic    string   `json:"topic"`
				Missing  []string `json:"missing"`
				Repaired int64    `json:"repaired"`
				RepairID string   `json:"repairId"`
			} `json:"results"`
		} `json:"found"`
		Run *catalog.RepublishRun `json:"run"`
	} `json:"repair"`
}

// summary lists the windows that are not clean.
func (r repairReport) summary() string {
	var out []string
	for _, res := range r.Results {
		if res.Status != "clean" {
			out = append(out, fmt.Sprintf("%s %s (%d missing, %d duplicates, %d unexpected)", res.Topic, res.Status, res.MissingCount, res.DuplicateCount, res.UnexpectedCount))
		}
	}
	if r.Repair.Run != nil {
		out = append(out, fmt.Sprintf("run %s: %d republished, %d present, %d refused", r.Repair.Run.ID, r.Repair.Run.Republished, r.Repair.Run.Present, r.Repair.Run.Refused))
	}
	return strings.Join(out, "; ")
}

func runRepair(t testing.TB, env []string, want int) repairReport {
	t.Helper()
	code, stdout, stderr := runCLI(t, env, reconcileRepair...)
	if code != want {
		t.Fatalf("reconcile --repair: exit %d, want %d\n%s\n%s", code, want, stdout, stderr)
	}
	var rep repairReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("reconcile --repair --json: %v\n%s", err, stdout)
	}
	return rep
}

// checkOnce fails unless the topic holds exactly the ids, each once.
func checkOnce(t testing.TB, store storage.Store, topic string, ids []string) []verify.Logged {
	t.Helper()
	rows, err := verify.ReadTopic(context.Background(), store, topic)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.ID]++
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("topic %s holds event %s %d times, want once", topic, id, seen[id])
		}
	}
	if len(rows) != len(ids) {
		t.Errorf("topic %s holds %d events, want %d", topic, len(rows), len(ids))
	}
	return rows
}

// TestRepairPublicationGap is the user story: the outbox is taken
// out of the publication, 50 events are written, it is put back, 50 more.
// The relay never sees the first 50 and reconcile names them; `relay
// reconcile --repair`, beside the running relay, publishes them from
// their outbox rows, marked as repaired, and checks again: clean, each of
// the 100 events in its topic once. A second repair publishes nothing and
// leaves the topic's table as it was.
func TestRepairPublicationGap(t *testing.T) {
	db := setup(t)
	url, store := localStore(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url}
	addr := freeAddr(t)
	p := startRelay(t, env, "--metrics-addr", addr, "--status-refresh", "100ms")
	waitSlotActive(t, db.DSN, "deltabus", p)

	gap := publicationGap(t, db, "orders", 50)
	streamed := writeBatch(t, db, "orders", 50)
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	time.Sleep(time.Second) // the windows of the events close

	code, stdout, stderr := runCLI(t, env, append(reconcileRecent, "--json")...)
	if code != 1 {
		t.Fatalf("reconcile before the repair: exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	var before struct {
		Results []struct {
			Missing []string `json:"missing"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &before); err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, r := range before.Results {
		missing = append(missing, r.Missing...)
	}
	slices.Sort(missing)
	if want := slices.Sorted(slices.Values(gap)); !slices.Equal(missing, want) {
		t.Fatalf("reconcile names %d missing events, want the %d of the gap", len(missing), len(want))
	}

	rep := runRepair(t, env, 0)
	run := rep.Repair.Run
	if run == nil || run.Republished != 50 || run.Kind != republish.KindRepair || run.State != "done" || run.Actor == "" {
		t.Fatalf("repair run %+v, want 50 republished by a named actor", run)
	}
	repaired := int64(0)
	for _, r := range rep.Repair.Found.Results {
		repaired += r.Repaired
		if r.Repaired > 0 && r.RepairID != run.ID {
			t.Fatalf("found window names repair %q, want %q", r.RepairID, run.ID)
		}
	}
	if repaired != 50 {
		t.Fatalf("the check's results say %d repaired, want 50", repaired)
	}
	for _, r := range rep.Results {
		if r.Status != "clean" {
			t.Fatalf("after the repair window of %s is %s (%d missing)", r.Topic, r.Status, r.MissingCount)
		}
	}
	all := append(slices.Clone(gap), streamed...)
	rows := checkOnce(t, store, "orders", all)
	// The repaired events keep their outbox fields and carry the source.
	appID := soleAppID(t, store)
	byID := map[string]verify.Logged{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	for _, id := range gap {
		if r := byID[id]; r.Source != appID || r.Version < 0 {
			t.Fatalf("repaired event %s: %+v", id, r)
		}
	}
	// Marked as repaired: the run's _republished rows name every one.
	marked := map[string]republish.Status{}
	if err := republish.ReadAudit(context.Background(), store, func(r republish.AuditRow) error {
		if r.RunID == run.ID {
			marked[r.ID] = r.Status
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range gap {
		if marked[id] != republish.Republished {
			t.Fatalf("event %s is not recorded as repaired by run %s: %q", id, run.ID, marked[id])
		}
	}

	// The operator's page shows the repair.
	time.Sleep(200 * time.Millisecond)
	shown := pageRuns(t, addr)
	if len(shown) == 0 || shown[0].ID != run.ID || shown[0].Kind != "repair" || shown[0].Republished != 50 {
		t.Fatalf("/api/status shows runs %+v, want repair %s first", shown, run.ID)
	}
	if html := pageHTML(t, addr); !strings.Contains(html, run.ID) {
		t.Fatalf("the operator's page does not show repair %s", run.ID)
	}

	// A second repair is a no-op: nothing missing, the table unchanged.
	v := latestVersion(t, store, "orders")
	again := runRepair(t, env, 0)
	if again.Repair.Run != nil && again.Repair.Run.Republished != 0 {
		t.Fatalf("a second repair published %d events", again.Repair.Run.Republished)
	}
	if got := latestVersion(t, store, "orders"); got != v {
		t.Fatalf("a second repair moved the topic's table from version %d to %d", v, got)
	}
	checkOnce(t, store, "orders", all)

	// The relay streams on after the repairs, undisturbed.
	later := writeBatch(t, db, "orders", 5)
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	checkOnce(t, store, "orders", append(all, later...))
	if err := p.stop(time.Minute); err != nil {
		t.Fatalf("relay did not stop: %v\n%s", err, p.tail())
	}
}

// TestConcurrentRepairsPublishOnce: two repairs of the same gap at once,
// beside the running relay, publish each missing event once between
// them.
func TestConcurrentRepairsPublishOnce(t *testing.T) {
	url, store := localStore(t)
	concurrentRepairs(t, url, store, nil)
}

// TestConcurrentRepairsPublishOnceS3 is the same against a real S3 server
// (versitygw): put-if-absent commits over HTTP.
func TestConcurrentRepairsPublishOnceS3(t *testing.T) {
	b := s3test.NewBucket(t)
	store, err := storage.Open(context.Background(), b.URL("bus"), b.Options())
	if err != nil {
		t.Fatal(err)
	}
	concurrentRepairs(t, b.URL("bus"), store, []string{
		"DELTABUS_S3_ENDPOINT=" + b.Endpoint, "DELTABUS_S3_PATH_STYLE=true", "AWS_REGION=" + b.Region,
		"AWS_ACCESS_KEY_ID=" + b.AccessKey, "AWS_SECRET_ACCESS_KEY=" + b.SecretKey,
	})
}

func concurrentRepairs(t *testing.T, url string, store storage.Store, extraEnv []string) {
	db := setup(t)
	env := append([]string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url}, extraEnv...)
	p := startRelay(t, env)
	waitSlotActive(t, db.DSN, "deltabus", p)
	first := writeBatch(t, db, "orders", 10)
	gap := publicationGap(t, db, "orders", 200)
	gap2 := publicationGap(t, db, "payments", 30) // a topic the relay never wrote
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	time.Sleep(time.Second)

	var wg sync.WaitGroup
	type output struct {
		code           int
		stdout, stderr string
	}
	outs := make([]output, 3)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &outs[i]
			o.code, o.stdout, o.stderr = runCLI(t, env, reconcileRepair...)
		}()
	}
	// The relay keeps committing meanwhile.
	during := writeBatch(t, db, "orders", 20)
	wg.Wait()
	total := 0
	for _, o := range outs {
		var r repairReport
		if err := json.Unmarshal([]byte(o.stdout), &r); o.code != 0 || err != nil {
			t.Fatalf("reconcile --repair: exit %d (%v): %s\n%s", o.code, err, r.summary(), o.stderr)
		}
		if r.Repair.Run != nil {
			total += r.Repair.Run.Republished
		}
	}
	if total != len(gap)+len(gap2) {
		t.Fatalf("the concurrent repairs published %d events between them, want %d", total, len(gap)+len(gap2))
	}
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	checkOnce(t, store, "orders", slices.Concat(first, gap, during))
	checkOnce(t, store, "payments", gap2)
	if err := p.stop(time.Minute); err != nil {
		t.Fatalf("relay did not stop: %v\n%s", err, p.tail())
	}
}
