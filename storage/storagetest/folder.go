package storagetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/deltabus/deltabus/storage"
)

// testPutBesideDelete: writers put and delete their own keys in one folder
// (and one parent) that keeps emptying, as relays starting at once on an
// empty store write and delete their probes under _deltabus/probes/. Every
// put must succeed: an S3 server backed by a file system (versitygw's
// posix backend) removes a folder its last object left, and a put that
// meets the removal fails with ExistingObjectIsDirectory unless the store
// tries it again.
func testPutBesideDelete(t *testing.T, s storage.Store) {
	const writers = 4
	n := 100
	if testing.Short() {
		n = 20
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range n {
				key := fmt.Sprintf("_deltabus/probes/w%d-%d", w, i)
				if err := s.Put(t.Context(), key, []byte("probe\n")); err != nil {
					errs <- fmt.Errorf("writer %d: put %s: %w", w, key, err)
					return
				}
				if err := s.Delete(t.Context(), key); err != nil {
					errs <- fmt.Errorf("writer %d: delete %s: %w", w, key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	wantLen(t, s, "_deltabus/", 0)
}
