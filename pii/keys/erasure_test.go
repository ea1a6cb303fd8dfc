package keys

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestErasureOutlivesTheKey: after an erasure no relay (this one, one with
// a cold cache, one of another source sharing the topic) creates a key for
// a value written before it, however late it meets it, and a value written
// after it gets a new key that no earlier value may use.
func TestErasureOutlivesTheKey(t *testing.T) {
	db := migratedDB(t)
	kek, _ := newKEK(t)
	ctx := testCtx(t)
	open := func() *Store {
		s, err := Open(ctx, db.DSN, kek, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	a, b := open(), open()
	sub, _ := a.SubjectHash([]byte("customer-7"))
	before := time.Now().Add(-time.Minute)
	if _, _, err := a.SealKey(ctx, "customers", sub, before); err != nil {
		t.Fatal(err)
	}
	if topics, err := a.Delete(ctx, sub, ""); err != nil || len(topics) != 1 {
		t.Fatalf("erase: %v %v", topics, err)
	}
	keyRows := func() (n int) {
		db.Conn(t).QueryRow(ctx, "SELECT count(*) FROM deltabus.subject_keys WHERE subject = $1", sub[:]).Scan(&n)
		return n
	}
	for name, s := range map[string]*Store{"the eraser's store": a, "another relay": b} {
		for _, topic := range []string{"customers", "orders"} { // every topic: also one the subject had no key in
			if _, _, err := s.SealKey(ctx, topic, sub, before); !errors.Is(err, ErrErased) {
				t.Fatalf("%s, topic %s: a value written before the erasure got a key: %v", name, topic, err)
			}
		}
	}
	if n := keyRows(); n != 0 {
		t.Fatalf("%d keys of the erased subject", n)
	}
	after := time.Now().Add(time.Second)
	fresh, _, err := b.SealKey(ctx, "customers", sub, after)
	if err != nil {
		t.Fatalf("a value written after the erasure: %v", err)
	}
	if fresh == nil || keyRows() != 1 {
		t.Fatal("no new key after the erasure")
	}
	// The new key exists now; an earlier value still may not use it,
	// whether the store has it cached or not.
	for name, s := range map[string]*Store{"cached": b, "cold": a} {
		if _, _, err := s.SealKey(ctx, "customers", sub, before); !errors.Is(err, ErrErased) {
			t.Fatalf("%s: a value written before the erasure uses the key made after it: %v", name, err)
		}
	}
	// An erasure of one topic leaves the others.
	other, _ := a.SubjectHash([]byte("customer-8"))
	a.SealKey(ctx, "orders", other, before)
	if _, err := a.Delete(ctx, other, "customers"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.SealKey(ctx, "orders", other, before); err != nil {
		t.Fatalf("another topic's key: %v", err)
	}
	if _, _, err := b.SealKey(ctx, "customers", other, before); !errors.Is(err, ErrErased) {
		t.Fatalf("the erased topic: %v", err)
	}
}

// TestErasureRacesKeyCreation: an erasure and a relay meeting the subject
// for the first time at once: whichever goes first, no key is left that a
// value written before the erasure got.
func TestErasureRacesKeyCreation(t *testing.T) {
	db := migratedDB(t)
	kek, _ := newKEK(t)
	ctx := testCtx(t)
	eraser, err := Open(ctx, db.DSN, kek, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eraser.Close()
	relays := make([]*Store, 3)
	for i := range relays {
		if relays[i], err = Open(ctx, db.DSN, kek, Options{}); err != nil {
			t.Fatal(err)
		}
		defer relays[i].Close()
	}
	written := time.Now().Add(-time.Minute)
	for i := range 30 {
		sub, _ := eraser.SubjectHash(fmt.Appendf(nil, "race-%d", i))
		var wg sync.WaitGroup
		for _, r := range relays {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := r.SealKey(ctx, "customers", sub, written); err != nil && !errors.Is(err, ErrErased) {
					t.Error(err)
				}
			}()
		}
		if _, err := eraser.Delete(ctx, sub, ""); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		var n int
		db.Conn(t).QueryRow(ctx, "SELECT count(*) FROM deltabus.subject_keys WHERE subject = $1", sub[:]).Scan(&n)
		if n != 0 {
			t.Fatalf("round %d: a key created for a value written before the erasure outlived it", i)
		}
	}
}
