package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
	"github.com/deltabus/deltabus/verify"
)

// TestRebuildLostTopicS3: on a real S3 server, one topic's table is deleted
// while the relay is down. The restarted relay holds that topic and streams
// the others; `relay rebuild` restores it while four producers keep
// writing. Every other topic then matches the source's commit order
// exactly; the rebuilt one holds every source row once, its snapshot rows
// first, its streamed rows in source commit order, and exactly the rows of
// transactions the snapshot could not see after the seam.
func TestRebuildLostTopicS3(t *testing.T) {
	b := s3test.NewBucket(t)
	store, err := storage.Open(context.Background(), b.URL("bus"), b.Options())
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"DELTABUS_STORE=" + b.URL("bus"), "DELTABUS_S3_ENDPOINT=" + b.Endpoint, "DELTABUS_S3_PATH_STYLE=true",
		"AWS_REGION=" + b.Region, "AWS_ACCESS_KEY_ID=" + b.AccessKey, "AWS_SECRET_ACCESS_KEY=" + b.SecretKey}
	db := setup(t)
	truth := newTruthSlot(t, db, "deltabus")
	env = append(env, "DELTABUS_SOURCE="+db.DSN)
	p := startRelay(t, env)
	waitSlotActive(t, db.DSN, "deltabus", p)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	events := 12_000
	var prod producers
	produced := make(chan struct{})
	go func() { prod.run(ctx, t, db.DSN, 4, events); close(produced) }()
	for prod.written.Load() < int64(events/4) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.stop(time.Minute); err != nil {
		t.Fatalf("relay: %v\n%s", err, p.tail())
	}
	lost := topics[0]
	deleteAll(t, storage.Sub(store, lost))
	p = startRelay(t, env)
	waitSlotActive(t, db.DSN, "deltabus", p)
	code, stdout, stderr := runCLI(t, env, "rebuild", "--topic", lost)
	if code != 0 || !strings.Contains(stdout, "committed by the relay") {
		t.Fatalf("rebuild: exit %d\n%s\n%s\nrelay:\n%s", code, stdout, stderr, p.tail())
	}
	t.Logf("%s (written so far: %d)", strings.TrimSpace(stdout), prod.written.Load())
	<-produced
	waitDrained(t, db.DSN, "deltabus", 3*time.Minute)
	if err := p.stop(time.Minute); err != nil {
		t.Fatalf("relay: %v\n%s", err, p.tail())
	}
	checkAfterRebuild(t, store, truth.read(t), lost)
}

// checkAfterRebuild checks every topic against the source after topic tp
// was rebuilt: the others exactly in source commit order, tp with
// checkRebuiltTopic's rules for its rebuild record.
func checkAfterRebuild(t testing.TB, store storage.Store, rows []truthRow, tp string) {
	t.Helper()
	checkAfterRebuildWith(t, store, rows, tp, checkRebuiltTopic)
}

// checkAfterRebuildWith checks every topic but tp exactly in source
// commit order, and tp's rows with check, given its rebuild record.
func checkAfterRebuildWith(t testing.TB, store storage.Store, rows []truthRow, tp string,
	check func(t testing.TB, tp string, got []verify.Logged, want []truthRow, rec catalog.RebuildRecord)) {
	t.Helper()
	ctx := context.Background()
	rec, ok, err := catalog.ReadRebuildRecord(ctx, store, soleAppID(t, store), tp)
	if err != nil || !ok {
		t.Fatalf("rebuild record of %s: %v", tp, err)
	}
	var others, rebuilt []truthRow
	for _, r := range rows {
		if r.Topic == tp {
			rebuilt = append(rebuilt, r)
		} else {
			others = append(others, r)
		}
	}
	checkAgainstTruth(t, store, others)
	got, err := verify.ReadTopic(ctx, store, tp)
	if err != nil {
		t.Fatal(err)
	}
	check(t, tp, got, rebuilt, rec)
}

// checkRebuiltTopic: each source row once; snapshot rows (commit_lsn = the
// rebuild's txn version) first; streamed rows in source commit order; every
// row committed before the pause watermark in the snapshot, every row
// committed at or after the seam's end streamed.
func checkRebuiltTopic(t testing.TB, tp string, got []verify.Logged, want []truthRow, rec catalog.RebuildRecord) {
	t.Helper()
	seamEnd, err := pglogrepl.ParseLSN(rec.SeamEnd)
	if err != nil {
		t.Fatal(err)
	}
	pos := make(map[string]int, len(want))
	for i, r := range want {
		pos[r.ID] = i
	}
	seen := map[string]bool{}
	last, streamed := -1, false
	for i, g := range got {
		k, ok := pos[g.ID]
		if !ok || seen[g.ID] {
			t.Fatalf("topic %s: row %d (%s): not a source row of the topic, or twice", tp, i, g.ID)
		}
		seen[g.ID] = true
		src := want[k]
		if g.CommitLSN < rec.TxnVersion && pglogrepl.LSN(g.CommitLSN) != src.CommitLSN {
			// A first start's snapshot row, from before the rebuild.
			if streamed {
				t.Fatalf("topic %s: first-start row %s after streamed rows", tp, g.ID)
			}
			continue
		}
		if g.CommitLSN == rec.TxnVersion {
			if streamed {
				t.Fatalf("topic %s: snapshot row %s after streamed rows", tp, g.ID)
			}
			if src.CommitLSN >= seamEnd {
				t.Errorf("topic %s: %s committed at %s, after the seam's end %s, came with the snapshot", tp, g.ID, src.CommitLSN, seamEnd)
			}
			continue
		}
		streamed = true
		if pglogrepl.LSN(g.CommitLSN) != src.CommitLSN || k < last {
			t.Fatalf("topic %s: streamed row %s out of source commit order", tp, g.ID)
		}
		if int64(src.CommitLSN) <= rec.TxnVersion {
			t.Errorf("topic %s: %s committed at %s, before the pause, was streamed again", tp, g.ID, src.CommitLSN)
		}
		last = k
	}
	if len(seen) != len(want) {
		t.Errorf("topic %s: %d distinct source rows after the rebuild, %d in the source", tp, len(seen), len(want))
	}
}

// moveAway removes a topic's table from a local store at one instant, as
// an operator's mv or rm -r of the directory appears to a relay that is
// streaming: deleting object by object would race its commits (one landing
// between the listing and the deletes would leave a log without its
// beginning, which no check of the relay's could prevent).
func moveAway(t testing.TB, storeURL, topic string) {
	t.Helper()
	dir, ok := strings.CutPrefix(storeURL, "file://")
	if !ok {
		t.Fatalf("moveAway needs a local store, got %s", storeURL)
	}
	from, to := filepath.Join(dir, topic), filepath.Join(t.TempDir(), topic)
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(to); err != nil {
		t.Fatal(err)
	}
}

func deleteAll(t testing.TB, st storage.Store) {
	t.Helper()
	objs, err := st.List(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := st.Delete(context.Background(), o.Key); err != nil {
			t.Fatal(err)
		}
	}
	if len(objs) == 0 {
		t.Fatal("nothing to delete: the topic had no table yet")
	}
}
