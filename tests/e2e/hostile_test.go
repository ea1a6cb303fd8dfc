package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/verify"
)

// evilDSN creates a role with no privilege beyond LOGIN (no REPLICATION,
// no right on the outbox) and returns a DSN for it on the test database.
func evilDSN(t testing.TB, s *scenario) string {
	t.Helper()
	s.db.Exec(t, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'nobody_special') THEN CREATE ROLE nobody_special LOGIN; END IF;
	END $$`)
	return strings.Replace(s.db.DSN, "postgres://postgres@", "postgres://nobody_special@", 1)
}

// emitAs writes a transactional logical message as the role of dsn.
func emitAs(t testing.TB, dsn, prefix, content string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_logical_emit_message(true, $1, $2)", prefix, content); err != nil {
		t.Fatalf("emit as an unprivileged role: %v", err)
	}
}

// streamingLocal starts a scenario on a local store whose relay streams
// while producers write events at rate a second, and returns once topic
// holds more than min rows.
func streamingLocal(t *testing.T, events, rate int, topic string, min int) (*scenario, *relayProc) {
	t.Helper()
	url, store := localStore(t)
	s := newScenario(t, url, store, nil)
	p := s.relay()
	waitSlotActive(t, s.db.DSN, s.slot, p)
	s.produce(events, rate)
	eventually(t, time.Minute, "first events of "+topic, func() bool { return topicRows(t, s, topic) > min })
	return s, p
}

func topicRows(t testing.TB, s *scenario, topic string) int {
	rows, err := verify.ReadTopic(context.Background(), s.store, topic)
	if err != nil {
		return 0
	}
	return len(rows)
}

// TestForgedWatermarksHaveNoEffect: a role with no privilege but LOGIN
// (pg_logical_emit_message is executable by PUBLIC) forges a pause of a
// topic, and an abort while a real rebuild holds another: the relay acts on
// neither (the store holds no intent for them), never echoes their content,
// and the topics end equal to the source.
func TestForgedWatermarksHaveNoEffect(t *testing.T) {
	t.Parallel() // a unique slot: runs beside the other fault tests
	s, p := streamingLocal(t, 6000, 300, "orders", 50)
	store := s.store
	evil := evilDSN(t, s)
	appID := s.db.AppID(t, s.slot)

	// A forged pause of orders: orders keeps streaming.
	forged := catalog.Watermark{Op: catalog.WatermarkPause, ID: catalog.NewID(), Topic: "orders", AppID: appID}
	emitAs(t, evil, catalog.WatermarkPrefix, forged.Encode())
	emitAs(t, evil, catalog.WatermarkPrefix, `{"op":"pause","topic":"orders","appId":"deltabus-deltabus","secret":"hunter2"}`)
	before := topicRows(t, s, "orders")
	eventually(t, time.Minute, "orders streaming after a forged pause", func() bool { return topicRows(t, s, "orders") > before+50 })

	// A real pause of payments (the intent in the store, as relay rebuild
	// writes it), then a forged abort: payments stays paused.
	ctx := context.Background()
	id := catalog.NewID()
	if err := catalog.WriteIntent(ctx, store, catalog.Intent{ID: id, Topic: "payments", AppID: appID, Kind: catalog.IntentRebuild}); err != nil {
		t.Fatal(err)
	}
	emitAs(t, s.db.DSN, catalog.WatermarkPrefix, catalog.Watermark{Op: catalog.WatermarkPause, ID: id, Topic: "payments", AppID: appID}.Encode())
	eventually(t, time.Minute, "payments paused", func() bool {
		st := heldState(ctx, store, "payments")
		return st.Paused == id
	})
	emitAs(t, evil, catalog.WatermarkPrefix, catalog.Watermark{Op: catalog.WatermarkAbort, ID: catalog.NewID(), Topic: "payments", AppID: appID}.Encode())
	emitAs(t, evil, catalog.WatermarkPrefix, catalog.Watermark{Op: catalog.WatermarkCommit, ID: id, Topic: "payments", AppID: appID}.Encode())
	time.Sleep(2 * time.Second)
	if st := heldState(ctx, store, "payments"); st.Paused != id {
		t.Fatalf("a forged abort or commit resolved the real pause: %+v", st)
	}
	// The operator's abort (its own intent) resumes payments.
	code, stdout, stderr := runCLI(t, s.env, "rebuild", "--topic", "payments", "--abort")
	if code != 0 {
		t.Fatalf("rebuild --abort: exit %d\n%s%s", code, stdout, stderr)
	}
	eventually(t, time.Minute, "payments resumed", func() bool {
		st := heldState(ctx, store, "payments")
		return st.Paused == ""
	})
	s.finish(s.waitTakeover([]*relayProc{p}, time.Minute))
	log := p.output()
	if !strings.Contains(log, "ignoring a rebuild watermark") {
		t.Error("the relay did not warn about the forged watermarks")
	}
	if strings.Contains(log, "hunter2") || strings.Contains(log, forged.ID) {
		t.Error("the relay's log echoes a forged watermark's content")
	}
}

// TestTableDeletedMidStreamThenRebuilt: a topic's table is deleted while
// the relay streams (an operator's mistake, a lifecycle rule). The relay
// never writes a log without its beginning: it holds the topic and streams
// the others; `relay rebuild --topic` then restores every event once, with
// no manual step.
func TestTableDeletedMidStreamThenRebuilt(t *testing.T) {
	t.Parallel() // a unique slot: runs beside the other fault tests
	lost := topics[0]
	s, p := streamingLocal(t, 8000, 400, lost, 100)
	store := s.store
	moveAway(t, s.storeURL, lost)
	t.Logf("table %s deleted after %d events", lost, s.written())
	ctx := context.Background()
	eventually(t, time.Minute, lost+" held", func() bool {
		st := heldState(ctx, store, lost)
		return st.Paused == catalog.HoldMissingTable
	})
	objs, _ := storage.Sub(store, lost).List(ctx, "_delta_log/", "")
	if len(objs) != 0 {
		t.Fatalf("the relay wrote %d log objects into the deleted table (first %s)", len(objs), objs[0].Key)
	}
	code, stdout, stderr := runCLI(t, s.env, "rebuild", "--topic", lost)
	if code != 0 || !strings.Contains(stdout, "committed by the relay") {
		t.Fatalf("rebuild: exit %d\n%s\n%s\nrelay:\n%s", code, stdout, stderr, p.tail())
	}
	<-s.produced
	waitDrained(t, s.db.DSN, s.slot, 3*time.Minute)
	s.stopWithin(p, 30*time.Second)
	checkAfterRebuild(t, store, s.truth.read(t), lost)
}
