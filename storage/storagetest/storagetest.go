package storagetest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/deltabus/deltabus/storage"
)

// NewStore returns a fresh, empty store for one test.
type NewStore func(t *testing.T) storage.Store

// Run runs the conformance suite, each case on its own store from newStore.
func Run(t *testing.T, newStore NewStore) {
	cases := []struct {
		name string
		fn   func(*testing.T, storage.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"GetMissing", testGetMissing},
		{"PutIfAbsentExisting", testPutIfAbsentExisting},
		{"PutIfAbsentSameBytes", testPutIfAbsentSameBytes},
		{"PutIfAbsentRace", testPutIfAbsentRace},
		{"PutOverwrites", testPutOverwrites},
		{"Create", testCreate},
		{"CreateAbort", testCreateAbort},
		{"ListOrder", testListOrder},
		{"ListPrefixStartAfter", testListPrefixStartAfter},
		{"ListEmpty", testListEmpty},
		{"Delete", testDelete},
		{"InvalidKeys", testInvalidKeys},
		{"CanceledContext", testCanceledContext},
		{"AmbiguousPutIfAbsent", testAmbiguousPutIfAbsent},
		{"Sub", testSub},
		{"OpenObject", testOpenObject},
		{"PutBesideDelete", testPutBesideDelete},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newStore(t)) })
	}
}

func mustPut(t *testing.T, s storage.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(t.Context(), key, data); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func mustGet(t *testing.T, s storage.Store, key string, want []byte) {
	t.Helper()
	got, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %d bytes %q, want %d bytes %q", key, len(got), trim(got), len(want), trim(want))
	}
}

func trim(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

func testRoundTrip(t *testing.T, s storage.Store) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	cases := map[string][]byte{
		"empty":                      {},
		"small.json":                 []byte(`{"commitInfo":{}}` + "\n"),
		"deep/a/b/c/d/e.bin":         {0, 1, 2, 255, 254, '\n', 0},
		"_delta_log/00000000000.crc": big,
	}
	for key, data := range cases {
		mustPut(t, s, key, data)
		mustGet(t, s, key, data)
	}
	if err := s.PutIfAbsent(t.Context(), "pia/x.json", []byte("pia")); err != nil {
		t.Fatalf("PutIfAbsent on a fresh key: %v", err)
	}
	mustGet(t, s, "pia/x.json", []byte("pia"))
}

func testGetMissing(t *testing.T, s storage.Store) {
	mustPut(t, s, "dir/present", []byte("x"))
	for _, key := range []string{"absent", "dir/absent", "nodir/absent", "dir", "dir/present/below"} {
		_, err := s.Get(t.Context(), key)
		if !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", key, err)
		}
	}
}

func testPutIfAbsentExisting(t *testing.T, s storage.Store) {
	key := "_delta_log/00000000000000000000.json"
	first := []byte("first writer\n")
	if err := s.PutIfAbsent(t.Context(), key, first); err != nil {
		t.Fatalf("first PutIfAbsent: %v", err)
	}
	err := s.PutIfAbsent(t.Context(), key, []byte("second writer\n"))
	if !errors.Is(err, storage.ErrExists) {
		t.Fatalf("second PutIfAbsent error = %v, want ErrExists", err)
	}
	mustGet(t, s, key, first)
	// Put-created objects count as existing too.
	mustPut(t, s, "plain", []byte("plain"))
	if err := s.PutIfAbsent(t.Context(), "plain", []byte("other")); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("PutIfAbsent over Put object error = %v, want ErrExists", err)
	}
	mustGet(t, s, "plain", []byte("plain"))
}

func testPutIfAbsentSameBytes(t *testing.T, s storage.Store) {
	data := []byte("same bytes")
	for i := range 3 {
		if err := s.PutIfAbsent(t.Context(), "k", data); err != nil {
			t.Fatalf("PutIfAbsent #%d with identical bytes: %v, want nil (idempotent)", i+1, err)
		}
	}
	mustGet(t, s, "k", data)
}

func testPutOverwrites(t *testing.T, s storage.Store) {
	mustPut(t, s, "_last_checkpoint", []byte("version 1, long content"))
	mustPut(t, s, "_last_checkpoint", []byte("v2"))
	mustGet(t, s, "_last_checkpoint", []byte("v2"))
	objs, err := s.List(t.Context(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Key != "_last_checkpoint" || objs[0].Size != 2 {
		t.Fatalf("List after overwrite = %+v, want one 2-byte object", objs)
	}
}

func testDelete(t *testing.T, s storage.Store) {
	if err := s.Delete(t.Context(), "never/was"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	mustPut(t, s, "a/b", []byte("x"))
	mustPut(t, s, "a/c", []byte("y"))
	if err := s.Delete(t.Context(), "a/b"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(t.Context(), "a/b"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get after Delete error = %v, want ErrNotFound", err)
	}
	if err := s.Delete(t.Context(), "a/b"); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	wantKeys(t, s, "", "", "a/c")
	// A deleted key is free for PutIfAbsent again.
	if err := s.PutIfAbsent(t.Context(), "a/b", []byte("z")); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
}

func testInvalidKeys(t *testing.T, s storage.Store) {
	ctx := t.Context()
	for _, key := range []string{"", "/abs", "a//b", "a/", "./a", "a/./b", "../a", "a/..", "a\x00b", "\xff"} {
		checks := map[string]error{
			"Put":         s.Put(ctx, key, []byte("x")),
			"PutIfAbsent": s.PutIfAbsent(ctx, key, []byte("x")),
			"Delete":      s.Delete(ctx, key),
		}
		_, checks["Get"] = s.Get(ctx, key)
		for op, err := range checks {
			if !errors.Is(err, storage.ErrInvalidKey) {
				t.Errorf("%s(%q) error = %v, want ErrInvalidKey", op, key, err)
			}
		}
	}
	for _, prefix := range []string{"/a", "a//b/c", "../x", "a/../b"} {
		if _, err := s.List(ctx, prefix, ""); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("List(%q) error = %v, want ErrInvalidKey", prefix, err)
		}
	}
	wantKeys(t, s, "", "")
}

func testCanceledContext(t *testing.T, s storage.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Put(ctx, "k", []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with canceled ctx error = %v, want context.Canceled", err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with canceled ctx error = %v, want context.Canceled", err)
	}
	if _, err := s.List(ctx, "", ""); !errors.Is(err, context.Canceled) {
		t.Errorf("List with canceled ctx error = %v, want context.Canceled", err)
	}
	if err := s.PutIfAbsent(ctx, "k", []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("PutIfAbsent with canceled ctx error = %v, want context.Canceled", err)
	}
	if err := s.Delete(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Delete with canceled ctx error = %v, want context.Canceled", err)
	}
	wantKeys(t, s, "", "")
}

func wantKeys(t *testing.T, s storage.Store, prefix, startAfter string, want ...string) {
	t.Helper()
	objs, err := s.List(t.Context(), prefix, startAfter)
	if err != nil {
		t.Fatalf("List(%q, %q): %v", prefix, startAfter, err)
	}
	got := make([]string, len(objs))
	for i, o := range objs {
		got[i] = o.Key
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List(%q, %q) = %q, want %q", prefix, startAfter, got, want)
	}
}
