package storagetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/deltabus/deltabus/storage"
)

// Race dimensions: racers goroutines contend for one fresh key per round.
const (
	racers = 16
	rounds = 50
)

func testPutIfAbsentRace(t *testing.T, s storage.Store) {
	n := rounds
	if testing.Short() {
		n = 10
	}
	for round := range n {
		key := fmt.Sprintf("_delta_log/%020d.json", round)
		winners, data := raceOnce(t, s, key)
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners %v, want exactly 1", round, len(winners), winners)
		}
		mustGet(t, s, key, data[winners[0]])
	}
	wantLen(t, s, "_delta_log/", n)
}

// raceOnce starts racers goroutines on key, each with its own bytes, and
// returns the indexes of those that got nil (and every racer's bytes).
func raceOnce(t *testing.T, s storage.Store, key string) (winners []int, data [][]byte) {
	data = make([][]byte, racers)
	errs := make([]error, racers)
	for i := range data {
		data[i] = fmt.Appendf(nil, `{"commitInfo":{"writer":%d,"key":%q}}`+"\n", i, key)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-start
			errs[i] = s.PutIfAbsent(t.Context(), key, data[i])
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		switch {
		case err == nil:
			winners = append(winners, i)
		case !errors.Is(err, storage.ErrExists):
			t.Fatalf("%s: racer %d: unexpected error %v", key, i, err)
		}
	}
	return winners, data
}

func wantLen(t *testing.T, s storage.Store, prefix string, n int) {
	t.Helper()
	objs, err := s.List(t.Context(), prefix, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != n {
		t.Fatalf("List(%q) = %d objects, want %d: %+v", prefix, len(objs), n, objs)
	}
}

// testAmbiguousPutIfAbsent: a write that landed but reported an error is
// resolved by retrying with the same bytes (nil), while a different writer's
// retry still gets ErrExists.
func testAmbiguousPutIfAbsent(t *testing.T, s storage.Store) {
	f := storage.NewFaulty(s)
	f.FailAfterNth(storage.OpPutIfAbsent, 1, nil)
	key := "_delta_log/00000000000000000007.json"
	ours := []byte("ours\n")
	err := f.PutIfAbsent(t.Context(), key, ours)
	if !errors.Is(err, storage.ErrInjected) {
		t.Fatalf("first PutIfAbsent error = %v, want the injected fault", err)
	}
	if err := f.PutIfAbsent(t.Context(), key, ours); err != nil {
		t.Fatalf("retry with the same bytes: %v, want nil (our write landed)", err)
	}
	if err := f.PutIfAbsent(t.Context(), key, []byte("theirs\n")); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("other writer after ambiguous write: %v, want ErrExists", err)
	}
	if got := f.Calls(storage.OpPutIfAbsent); got != 3 {
		t.Fatalf("Calls(PutIfAbsent) = %d, want 3", got)
	}
	mustGet(t, s, key, ours)

	// A fault before the call: nothing lands, a retry writes.
	f.FailNth(storage.OpPutIfAbsent, 4, nil)
	other := "_delta_log/00000000000000000008.json"
	if err := f.PutIfAbsent(t.Context(), other, ours); !errors.Is(err, storage.ErrInjected) {
		t.Fatalf("PutIfAbsent with a fault before: %v, want the injected fault", err)
	}
	if _, err := s.Get(t.Context(), other); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get after a failed-before write: %v, want ErrNotFound", err)
	}
	if err := f.PutIfAbsent(t.Context(), other, ours); err != nil {
		t.Fatalf("retry: %v", err)
	}
}

func testSub(t *testing.T, s storage.Store) {
	sub := storage.Sub(s, "orders")
	if err := sub.PutIfAbsent(t.Context(), "_delta_log/00000000000000000000.json", []byte("v0")); err != nil {
		t.Fatal(err)
	}
	mustPut(t, sub, "part-0.parquet", []byte("p"))
	mustPut(t, s, "orders2/x", []byte("sibling"))
	mustPut(t, s, "other/_delta_log/00000000000000000000.json", []byte("other"))
	mustGet(t, s, "orders/_delta_log/00000000000000000000.json", []byte("v0"))
	mustGet(t, sub, "part-0.parquet", []byte("p"))
	wantKeys(t, sub, "", "", "_delta_log/00000000000000000000.json", "part-0.parquet")
	wantKeys(t, sub, "_delta_log/", "", "_delta_log/00000000000000000000.json")
	wantKeys(t, sub, "part", "", "part-0.parquet")
	wantKeys(t, sub, "", "_delta_log/00000000000000000000.json", "part-0.parquet")
	if _, err := sub.Get(t.Context(), "x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get missing via Sub: %v", err)
	}
	if err := sub.PutIfAbsent(t.Context(), "_delta_log/00000000000000000000.json", []byte("v0'")); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("PutIfAbsent existing via Sub: %v, want ErrExists", err)
	}
	if err := sub.Delete(t.Context(), "part-0.parquet"); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, s, "orders", "", "orders/_delta_log/00000000000000000000.json", "orders2/x")
	nested := storage.Sub(storage.Sub(s, "a"), "b/c")
	mustPut(t, nested, "k", []byte("n"))
	mustGet(t, s, "a/b/c/k", []byte("n"))
	if got, want := nested.String(), s.String()+"/a/b/c"; got != want {
		t.Errorf("nested Sub String() = %q, want %q", got, want)
	}
	if err := storage.Sub(s, "../up").Put(t.Context(), "k", nil); !errors.Is(err, storage.ErrInvalidKey) {
		t.Fatalf("Sub with invalid prefix: Put error = %v, want ErrInvalidKey", err)
	}
}
