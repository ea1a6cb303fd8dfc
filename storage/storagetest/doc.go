// Package storagetest is the conformance suite for storage.Store: one set of
// tests every backend must pass (round trips, ErrNotFound, put-if-absent
// exclusivity under races, idempotent retries of ambiguous writes, byte-order
// listing with prefix and startAfter, deletes, key validation, sub-stores),
// and RunSweep for storage.Sweeper (old leftovers of killed writers go,
// young ones, live writers and objects stay).
//
//	func TestLocal(t *testing.T) {
//		storagetest.Run(t, func(t *testing.T) storage.Store { ... fresh empty store ... })
//	}
package storagetest
