package e2e

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/retentiontest"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/verify"
)

// consumerEvents is the size of the consumer kill test; DELTABUS_CONSUMER_EVENTS scales it.
func consumerEvents() int {
	if v, err := strconv.Atoi(os.Getenv("DELTABUS_CONSUMER_EVENTS")); err == nil && v > 0 {
		return v
	}
	return 12000
}

// TestConsumerKilledMaterialisesExactlyOnce: the example consumer
// materialises topic "orders" into its own PostgreSQL table, checkpointing
// in the same transaction, while producers write and the relay streams;
// it is SIGKILLed at 10 random moments (all while the producers write, at
// 1,000 events/s, and the relay compacts the topic tables every second)
// and restarted. The table must end equal to the topic: every event once,
// in the topic's order.
func TestConsumerKilledMaterialisesExactlyOnce(t *testing.T) {
	storeURL, store := localStore(t)
	db := setup(t)
	cdb := pgtest.NewDB(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + storeURL}
	relay := startRelay(t, env, "--batch-max-delay", "20ms", "--batch-max-events", "300", "--maintenance", "1s")
	waitSlotActive(t, db.DSN, "deltabus", relay)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	args := []string{"--store", storeURL, "--topic", "orders", "--group", "orders-table", "--dsn", cdb.DSN,
		"--table", "orders_events", "--batch", "37", "--poll", "50ms"}
	c := startConsumer(t, nil, args...) // waits for the topic's table
	var prod pacedProducer
	produced := make(chan struct{})
	total := consumerEvents()
	go func() { prod.run(ctx, t, db.DSN, 1000, total); close(produced) }()
	for latestVersion(t, store, "orders") < 1 {
		time.Sleep(20 * time.Millisecond)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	for i := range 10 {
		time.Sleep(time.Duration(100+rng.IntN(500)) * time.Millisecond)
		if done, err := c.exited(); done {
			t.Fatalf("consumer exited on its own: %v\n%s", err, c.tail())
		}
		c.kill()
		t.Logf("kill %d: consumer SIGKILLed after %d of %d events written", i+1, prod.written.Load(), total)
		c = startConsumer(t, nil, args...)
	}
	if prod.written.Load() == int64(total) {
		t.Errorf("the producers finished before the last kill: kills did not happen while the relay wrote")
	}
	<-produced
	waitDrained(t, db.DSN, "deltabus", 3*time.Minute)
	want, err := verify.ReadTopic(context.Background(), store, "orders")
	if err != nil {
		t.Fatal(err)
	}
	got := waitRows(t, cdb.DSN, "orders_events", len(want), c)
	if len(got) != len(want) {
		t.Fatalf("table has %d rows, topic %d events", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i].ID {
			t.Fatalf("row %d is %s, the topic's event %d is %s (a duplicate, a gap or out of order)", i, got[i], i, want[i].ID)
		}
	}
	compactions := regexp.MustCompile(`files_compacted=[1-9]`).FindAllString(relay.output(), -1)
	if len(compactions) == 0 {
		t.Error("the relay never compacted while the consumer ran")
	}
	t.Logf("%d events materialised once each, in topic order, across 10 kills and %d compaction runs", len(want), len(compactions))
}

// waitRows waits until table holds n rows (or a minute passes with no
// change) and returns its event ids in insertion order.
func waitRows(t testing.TB, dsn, table string, n int, c *relayProc) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	last, since := -1, time.Now()
	for {
		var count int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&count); err != nil {
			t.Fatal(err)
		}
		if count >= n || time.Since(since) > time.Minute {
			break
		}
		if count != last {
			last, since = count, time.Now()
		}
		if done, err := c.exited(); done {
			t.Fatalf("consumer exited: %v\n%s", err, c.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // a duplicate would land right after
	rows, err := conn.Query(ctx, `SELECT event_id FROM `+table+` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestConsumerBehindRetentionFails: a group whose checkpoint the log
// clean-up passed fails with the clear error, and so does the check.
func TestConsumerBehindRetentionFails(t *testing.T) {
	storeURL, store := localStore(t)
	db := setup(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + storeURL}
	relay := startRelay(t, env, "--batch-max-delay", "10ms")
	waitSlotActive(t, db.DSN, "deltabus", relay)
	produceUntilVersion(t, db.DSN, store, "orders", 10)
	out, errOut, code := runRelayCmd(t, env, "consume", "--topic", "orders", "--group", "late")
	if code != 0 {
		t.Fatalf("first consume: exit %d: %s", code, errOut)
	}
	checkConsumeLines(t, out)
	cdb := pgtest.NewDB(t)
	if _, errOut, code := runRelayCmd(t, env, "consume", "--topic", "orders", "--group", "late-pg", "--checkpoint", cdb.DSN); code != 0 {
		t.Fatalf("consume with a PostgreSQL checkpoint: exit %d: %s", code, errOut)
	}
	cp, ok, err := subscribe.NewStoreCheckpoints(store).Load(context.Background(), "late", "orders")
	if err != nil || !ok {
		t.Fatalf("checkpoint of group late: %v %t", err, ok)
	}
	pos := cp.Version
	produceUntilVersion(t, db.DSN, store, "orders", 105)
	retentiontest.CleanLog(t, storage.Sub(store, "orders"), 100)

	_, errOut, code = runRelayCmd(t, env, "consume", "--topic", "orders", "--group", "late")
	want := "retention passed this group's position (version " + strconv.FormatInt(pos, 10) + ", earliest 100)"
	if code != 1 || !strings.Contains(errOut, want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("consume behind retention: exit %d, stderr %q; want exit 1 and one line with %q", code, errOut, want)
	}
	_, errPG, codePG := runRelayCmd(t, env, "consume", "--topic", "orders", "--group", "late-pg", "--checkpoint", cdb.DSN)
	if codePG != 1 || !strings.Contains(errPG, "retention passed this group's position") {
		t.Fatalf("PostgreSQL-checkpointed group behind retention: exit %d, %q", codePG, errPG)
	}
	rows, _, code := checkRows(t, env)
	if r := rows["late"]; code != 1 || r.HeadroomVersions >= 0 || len(r.Breaches) == 0 || !strings.Contains(r.Breaches[0], "retention passed") {
		t.Fatalf("check consumers: exit %d, row %+v", code, r)
	}
	if _, errOut, code := runRelayCmd(t, env, "consume", "--topic", "orders", "--group", "late", "--from-version", "100"); code != 0 {
		t.Fatalf("consume after an explicit reset: exit %d: %s", code, errOut)
	}
}

// checkConsumeLines: `relay consume` prints one JSON object per event, in
// (commit_lsn, seq) order, payload nested.
func checkConsumeLines(t testing.TB, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 10 {
		t.Fatalf("consume printed %d lines", len(lines))
	}
	var prev struct{ lsn, seq float64 }
	for i, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
		payload, ok := ev["payload"].(map[string]any)
		if !ok || payload["n"] == nil || ev["topic"] != "orders" || ev["event_id"] == "" {
			t.Fatalf("line %d: %s", i, l)
		}
		lsn, seq := ev["commit_lsn"].(float64), ev["seq"].(float64)
		if i > 0 && (lsn < prev.lsn || (lsn == prev.lsn && seq <= prev.seq)) {
			t.Fatalf("line %d is not after line %d in (commit_lsn, seq) order", i, i-1)
		}
		prev.lsn, prev.seq = lsn, seq
	}
}
