package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
)

const (
	crashCommits  = 500
	crashRows     = 10
	crashAppID    = "crash-writer"
	crashChildEnv = "DELTABUS_DELTA_CRASH_CHILD"
)

// deltaWriterChild is the writer process of the Delta crash tests (the test
// binary re-executed with crashChildEnv set; see TestMain): it commits
// batches with txn versions 1..500, resuming after the last one the table
// holds.
func deltaWriterChild(url string) error {
	ctx := context.Background()
	st, err := storage.Open(ctx, url, storage.S3Options{})
	if err != nil {
		return err
	}
	meta, proto := topic.NewTableMetadata("crash")
	if err := delta.CreateTable(ctx, st, meta, proto, nil); err != nil {
		return err
	}
	tbl, err := delta.OpenTable(ctx, st, delta.Options{})
	if err != nil {
		return err
	}
	next := int64(1)
	if v, ok := tbl.TxnVersion(crashAppID); ok {
		next = v + 1
	}
	for v := next; v <= crashCommits; v++ {
		w := topic.NewFileWriter(st, topic.FileOptions{})
		for i := range crashRows {
			ev := &outbox.Event{ID: fmt.Sprintf("v%04d-r%02d", v, i), Topic: "crash", Key: "k", Type: "T", SchemaVersion: 1,
				Payload: "{}", OccurredAt: time.Now().UTC(), CommitLSN: v, Seq: int32(i), CommitTime: time.Now().UTC()}
			if err := w.Append(ev); err != nil {
				return err
			}
		}
		adds, err := w.Close(ctx)
		if err != nil {
			return err
		}
		if _, err := tbl.Commit(ctx, delta.CommitActions{Adds: adds, Txn: &delta.Txn{AppID: crashAppID, Version: v}}); err != nil {
			return err
		}
	}
	return nil
}

// TestDeltaWriterCrashLocal and TestDeltaWriterCrashS3: a writer process
// SIGKILLed at random points during 500 commits leaves a table whose every
// version is complete and readable, with no duplicate txn version and no
// lost or duplicated batch.
func TestDeltaWriterCrashLocal(t *testing.T) {
	url, st := localStore(t)
	deltaCrash(t, url, st, nil)
}

func TestDeltaWriterCrashS3(t *testing.T) {
	b := s3test.NewBucket(t)
	st, err := storage.Open(context.Background(), b.URL("crash"), b.Options())
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"DELTABUS_S3_ENDPOINT=" + b.Endpoint, "DELTABUS_S3_PATH_STYLE=true", "AWS_REGION=" + b.Region,
		"AWS_ACCESS_KEY_ID=" + b.AccessKey, "AWS_SECRET_ACCESS_KEY=" + b.SecretKey}
	deltaCrash(t, b.URL("crash"), st, env)
}

func deltaCrash(t testing.TB, url string, st storage.Store, env []string) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	kills := 0
	for attempt := 0; attempt < 200; attempt++ {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(append(os.Environ(), crashChildEnv+"="+url), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, _ := os.CreateTemp(t.TempDir(), "child")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				b, _ := os.ReadFile(out.Name())
				t.Fatalf("writer failed on its own: %v\n%s", err, b)
			}
			t.Logf("500 commits done after %d kills", kills)
			checkCrashTable(t, st)
			return
		case <-time.After(time.Duration(100+rng.IntN(600)) * time.Millisecond):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			kills++
		}
	}
	t.Fatal("writer never finished")
}

func checkCrashTable(t testing.TB, st storage.Store) {
	t.Helper()
	ctx := context.Background()
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Txns[crashAppID].Version; got != crashCommits {
		t.Fatalf("txn version %d, want %d", got, crashCommits)
	}
	seenTxn := map[int64]int64{}
	rows := map[string]bool{}
	for v := int64(1); v <= snap.Version; v++ {
		data, err := st.Get(ctx, delta.CommitKey(v))
		if err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		acts, err := delta.ParseCommit(data)
		if err != nil {
			t.Fatalf("version %d is not complete: %v", v, err)
		}
		for _, a := range acts {
			if a.Txn != nil {
				if prev, dup := seenTxn[a.Txn.Version]; dup {
					t.Fatalf("txn version %d in versions %d and %d", a.Txn.Version, prev, v)
				}
				seenTxn[a.Txn.Version] = v
			}
			if a.Add != nil {
				err := topic.ReadEventIDs(ctx, st, *a.Add, func(r topic.EventRef) error {
					if rows[r.ID] {
						return fmt.Errorf("row %s twice", r.ID)
					}
					rows[r.ID] = true
					return nil
				})
				if err != nil {
					t.Fatalf("version %d: %v", v, err)
				}
			}
		}
		if v%50 == 0 {
			if _, err := delta.LoadSnapshot(ctx, st, v); err != nil {
				t.Fatalf("snapshot at version %d: %v", v, err)
			}
		}
	}
	if len(seenTxn) != crashCommits || len(rows) != crashCommits*crashRows {
		t.Fatalf("%d txn versions and %d rows, want %d and %d", len(seenTxn), len(rows), crashCommits, crashCommits*crashRows)
	}
	if _, err := st.Get(ctx, delta.CommitKey(snap.Version+1)); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("version after latest: %v", err)
	}
}
