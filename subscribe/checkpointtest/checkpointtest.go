// Package checkpointtest is the conformance suite every
// subscribe.Checkpoints implementation passes.
package checkpointtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/subscribe"
)

// Options describe what the store under test promises beyond the contract.
type Options struct {
	// Transactional: apply gets a non-nil tx and its writes commit with
	// the checkpoint.
	Transactional bool
	// Fenced: of racing Commits from the same prev, exactly one succeeds.
	Fenced bool
}

// Run runs the suite; newStore returns an empty store for each subtest.
func Run(t *testing.T, newStore func(t *testing.T) subscribe.Checkpoints, o Options) {
	t.Run("LoadMissing", func(t *testing.T) { loadMissing(t, newStore(t)) })
	t.Run("CommitAndLoad", func(t *testing.T) { commitAndLoad(t, newStore(t), o) })
	t.Run("StalePrevIsRefused", func(t *testing.T) { stalePrev(t, newStore(t)) })
	t.Run("ApplyErrorKeepsCheckpoint", func(t *testing.T) { applyError(t, newStore(t)) })
	t.Run("GroupsAndTopicsAreSeparate", func(t *testing.T) { separate(t, newStore(t)) })
	t.Run("InvalidNamesAreRefused", func(t *testing.T) { invalidNames(t, newStore(t)) })
	if o.Fenced {
		t.Run("RacingCommitsOneWins", func(t *testing.T) { racing(t, newStore(t)) })
	}
}

func cp(group, topic string, v, off int64) subscribe.Checkpoint {
	return subscribe.Checkpoint{Group: group, Topic: topic, Position: subscribe.Position{Version: v, Offset: off}, TableID: "table-1"}
}

func mustLoad(t *testing.T, s subscribe.Checkpoints, group, topic string) (subscribe.Checkpoint, bool) {
	t.Helper()
	c, ok, err := s.Load(context.Background(), group, topic)
	if err != nil {
		t.Fatalf("Load(%s, %s): %v", group, topic, err)
	}
	return c, ok
}

func loadMissing(t *testing.T, s subscribe.Checkpoints) {
	if _, ok := mustLoad(t, s, "g", "orders"); ok {
		t.Fatal("Load of a group without checkpoint returned ok")
	}
	list, err := s.List(context.Background())
	if err != nil || len(list) != 0 {
		t.Fatalf("List of an empty store = %v, %v", list, err)
	}
}

func commitAndLoad(t *testing.T, s subscribe.Checkpoints, o Options) {
	ctx := context.Background()
	first := cp("g", "orders", 3, 7)
	calls := 0
	err := s.Commit(ctx, nil, first, func(_ context.Context, tx pgx.Tx) error {
		calls++
		if o.Transactional != (tx != nil) {
			t.Errorf("apply got tx %v, transactional store %t", tx, o.Transactional)
		}
		return nil
	})
	if err != nil || calls != 1 {
		t.Fatalf("first Commit: %v, apply called %d times", err, calls)
	}
	got, ok := mustLoad(t, s, "g", "orders")
	if !ok || got.Position != first.Position || got.TableID != "table-1" || got.Group != "g" || got.Topic != "orders" || got.UpdatedAt.IsZero() {
		t.Fatalf("Load after Commit = %+v, %t; want %+v with UpdatedAt", got, ok, first)
	}
	second := cp("g", "orders", 4, 0)
	if err := s.Commit(ctx, &got, second, nil); err != nil {
		t.Fatalf("second Commit (no apply): %v", err)
	}
	if got, _ := mustLoad(t, s, "g", "orders"); got.Position != second.Position {
		t.Fatalf("Load = %+v, want %+v", got.Position, second.Position)
	}
}

func stalePrev(t *testing.T, s subscribe.Checkpoints) {
	ctx := context.Background()
	a := cp("g", "orders", 1, 0)
	if err := s.Commit(ctx, nil, a, nil); err != nil {
		t.Fatal(err)
	}
	apply := func(context.Context, pgx.Tx) error { return nil }
	if err := s.Commit(ctx, nil, cp("g", "orders", 9, 0), apply); !errors.Is(err, subscribe.ErrCheckpointMoved) {
		t.Fatalf("Commit with prev=nil over an existing checkpoint: %v, want ErrCheckpointMoved", err)
	}
	if err := s.Commit(ctx, &a, cp("g", "orders", 2, 5), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, &a, cp("g", "orders", 3, 0), apply); !errors.Is(err, subscribe.ErrCheckpointMoved) {
		t.Fatalf("Commit from a stale prev: %v, want ErrCheckpointMoved", err)
	}
	if got, _ := mustLoad(t, s, "g", "orders"); got.Position != (subscribe.Position{Version: 2, Offset: 5}) {
		t.Fatalf("after refused commits the checkpoint is %+v, want version 2 offset 5", got.Position)
	}
}

func applyError(t *testing.T, s subscribe.Checkpoints) {
	ctx := context.Background()
	boom := errors.New("handler failed")
	err := s.Commit(ctx, nil, cp("g", "orders", 5, 0), func(context.Context, pgx.Tx) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Commit with a failing apply: %v, want the apply error", err)
	}
	if c, ok := mustLoad(t, s, "g", "orders"); ok {
		t.Fatalf("a failed apply stored %+v", c)
	}
}

func separate(t *testing.T, s subscribe.Checkpoints) {
	ctx := context.Background()
	want := []subscribe.Checkpoint{cp("a", "orders", 1, 1), cp("a", "payments", 2, 2), cp("a-b", "orders", 3, 3), cp("b", "orders", 4, 4)}
	for _, c := range []int{3, 1, 0, 2} {
		if err := s.Commit(ctx, nil, want[c], nil); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != len(want) {
		t.Fatalf("List = %+v, %v", list, err)
	}
	for i, c := range list {
		if c.Group != want[i].Group || c.Topic != want[i].Topic || c.Position != want[i].Position {
			t.Errorf("List[%d] = %s/%s %+v, want %s/%s %+v", i, c.Group, c.Topic, c.Position, want[i].Group, want[i].Topic, want[i].Position)
		}
	}
}

func invalidNames(t *testing.T, s subscribe.Checkpoints) {
	ctx := context.Background()
	for _, c := range []subscribe.Checkpoint{cp("../x", "orders", 1, 0), cp("G", "orders", 1, 0), cp("g", "a/b", 1, 0), cp("", "orders", 1, 0)} {
		if err := s.Commit(ctx, nil, c, nil); err == nil {
			t.Errorf("Commit for group %q topic %q succeeded", c.Group, c.Topic)
		}
	}
}

func racing(t *testing.T, s subscribe.Checkpoints) {
	ctx := context.Background()
	base := cp("g", "orders", 1, 0)
	if err := s.Commit(ctx, nil, base, nil); err != nil {
		t.Fatal(err)
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Commit(ctx, &base, cp("g", "orders", 2, int64(i)), nil)
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, subscribe.ErrCheckpointMoved):
				t.Errorf("racing Commit: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d racing commits from the same checkpoint succeeded, want exactly 1", wins.Load())
	}
}
