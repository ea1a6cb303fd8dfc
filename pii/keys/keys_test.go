package keys

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tink-crypto/tink-go/v2/tink"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/tests/kmstest"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/usererr"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(kmstest.Wrap(m))) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newKEK writes a KEK file and opens it.
func newKEK(t *testing.T) (*KEK, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kek.json")
	if _, err := WriteKEKFile(path); err != nil {
		t.Fatal(err)
	}
	kek, err := OpenKEK(context.Background(), "file://"+path)
	if err != nil {
		t.Fatal(err)
	}
	return kek, path
}

func migratedDB(t *testing.T) *pgtest.DB {
	db := pgtest.NewDB(t)
	conn := db.Conn(t)
	if _, err := migrations.ApplyKeys(testCtx(t), conn); err != nil {
		t.Fatal(err)
	}
	rep, err := migrations.ApplyKeys(testCtx(t), conn)
	if err != nil || rep.Changed() {
		t.Fatalf("second ApplyKeys: %v %v", rep, err)
	}
	return db
}

func TestKEKFile(t *testing.T) {
	kek, path := newKEK(t)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}
	if !strings.HasPrefix(kek.ID, "file keyset ") {
		t.Fatalf("id %q", kek.ID)
	}
	if _, err := WriteKEKFile(path); err == nil || !strings.Contains(err.Error(), "never overwritten") {
		t.Fatalf("overwrite: %v", err)
	}
	os.Chmod(path, 0o644)
	if _, err := OpenKEK(context.Background(), "file://"+path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("open a KEK readable by others: %v", err)
	}
	for uri, want := range map[string]string{
		"":                      "no KEK",
		"file:///nonexistent/k": "cannot be read",
		"vault://secret":        "neither file:// nor aws-kms://",
		"aws-kms://not-an-arn":  "aws-kms://arn:aws:kms:REGION",
	} {
		_, err := OpenKEK(context.Background(), uri)
		if err == nil || !usererr.Is(err) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("OpenKEK(%q) = %v, want one line with %q", uri, err, want)
		}
	}
	other := filepath.Join(t.TempDir(), "x.json")
	os.WriteFile(other, []byte(`{"not":"a keyset"}`), 0o600)
	if _, err := OpenKEK(context.Background(), "file://"+other); err == nil || !strings.Contains(err.Error(), "not a Tink keyset") {
		t.Fatalf("not a keyset: %v", err)
	}
}

func TestDataKeyCreatedOnceAcrossStores(t *testing.T) {
	db := migratedDB(t)
	kek, _ := newKEK(t)
	ctx := testCtx(t)
	const n = 6
	stores := make([]*Store, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n { // several relays open the table at once: one root
		wg.Add(1)
		go func() { defer wg.Done(); stores[i], errs[i] = Open(ctx, db.DSN, kek, Options{}) }()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		defer stores[i].Close()
	}
	sub, err := stores[0].SubjectHash([]byte("customer-42"))
	if err != nil {
		t.Fatal(err)
	}
	if sub2, _ := stores[n-1].SubjectHash([]byte("customer-42")); sub2 != sub {
		t.Fatal("stores hash a subject differently: more than one root")
	}
	aeads := make([]tink.AEAD, n)
	for i := range n { // and meet a new subject at once: one key
		wg.Add(1)
		go func() { defer wg.Done(); aeads[i], _, errs[i] = stores[i].SealKey(ctx, "customers", sub, time.Now()) }()
	}
	wg.Wait()
	ct, err := aeads[0].Encrypt([]byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if pt, err := aeads[i].Decrypt(ct, nil); err != nil || string(pt) != "x" {
			t.Fatalf("store %d has another key: %v", i, err)
		}
	}
	var rows int
	db.Conn(t).QueryRow(ctx, "SELECT count(*) FROM deltabus.subject_keys").Scan(&rows)
	if rows != 1 {
		t.Fatalf("%d key rows, want 1", rows)
	}
	// The table holds the hash, never the id; each topic has its own key.
	var ids int
	db.Conn(t).QueryRow(ctx, "SELECT count(*) FROM deltabus.subject_keys WHERE position('customer-42'::bytea in subject) > 0 OR position('customer-42'::bytea in wrapped) > 0").Scan(&ids)
	if ids != 0 {
		t.Fatal("the subject id is in the key table")
	}
	other, _, err := stores[1].SealKey(ctx, "orders", sub, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Decrypt(ct, nil); err == nil {
		t.Fatal("two topics share a key")
	}
}

func TestEraseAndReadOnly(t *testing.T) {
	db := migratedDB(t)
	kek, _ := newKEK(t)
	ctx := testCtx(t)
	if _, err := Open(ctx, db.DSN, kek, Options{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "no root key yet") {
		t.Fatalf("read-only open before any root: %v", err)
	}
	relay, err := Open(ctx, db.DSN, kek, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	consumer, err := Open(ctx, db.DSN, kek, Options{ReadOnly: true, CacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	sub, _ := relay.SubjectHash([]byte("s1"))
	if _, _, err := consumer.SealKey(ctx, "customers", sub, time.Now()); !errors.Is(err, ErrErased) {
		t.Fatalf("a read-only store created a key: %v", err)
	}
	consumer.Forget("", sub)
	if _, _, err := relay.SealKey(ctx, "customers", sub, time.Now()); err != nil {
		t.Fatal(err)
	}
	relay.SealKey(ctx, "orders", sub, time.Now())
	if _, err := consumer.DataKey(ctx, "customers", sub); err != nil {
		t.Fatal(err)
	}
	topics, err := relay.Delete(ctx, sub, "customers")
	if err != nil || len(topics) != 1 || topics[0] != "customers" {
		t.Fatalf("delete one topic: %v %v", topics, err)
	}
	// The consumer's cache still holds the key until it forgets it (at the
	// erasure record) or its TTL passes.
	if _, err := consumer.DataKey(ctx, "customers", sub); err != nil {
		t.Fatalf("cached key: %v", err)
	}
	consumer.Forget("", sub)
	if _, err := consumer.DataKey(ctx, "customers", sub); !errors.Is(err, ErrErased) {
		t.Fatalf("after erasure: %v", err)
	}
	if _, err := consumer.DataKey(ctx, "orders", sub); err != nil {
		t.Fatalf("the other topic's key went too: %v", err)
	}
	if topics, _ := relay.Delete(ctx, sub, ""); len(topics) != 1 || topics[0] != "orders" {
		t.Fatalf("delete every topic: %v", topics)
	}
	// Pseudonyms are stable per topic and differ across topics.
	p1, _ := relay.PseudonymizeKey("customers", "ada@example.com")
	p2, _ := consumer.PseudonymizeKey("customers", "ada@example.com")
	p3, _ := relay.PseudonymizeKey("orders", "ada@example.com")
	if p1 != p2 || p1 == p3 || !strings.HasPrefix(p1, PseudonymPrefix) || strings.Contains(p1, "ada") {
		t.Fatalf("pseudonyms %q %q %q", p1, p2, p3)
	}
}

func TestCacheBounds(t *testing.T) {
	db := migratedDB(t)
	kek, _ := newKEK(t)
	ctx := testCtx(t)
	s, err := Open(ctx, db.DSN, kek, Options{CacheSize: 3, CacheTTL: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 10 {
		sub, _ := s.SubjectHash([]byte{byte(i)})
		if _, _, err := s.SealKey(ctx, "t", sub, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.CacheLen(); n != 3 {
		t.Fatalf("cache holds %d, want 3", n)
	}
	time.Sleep(400 * time.Millisecond)
	if n := s.CacheLen(); n != 0 {
		t.Fatalf("cache holds %d after its TTL", n)
	}
}

func TestBadKeyTable(t *testing.T) {
	ctx := testCtx(t)
	kek, _ := newKEK(t)
	bare := pgtest.NewDB(t)
	_, err := Open(ctx, bare.DSN, kek, Options{})
	if err == nil || !strings.Contains(err.Error(), "run `relay migrate`") {
		t.Fatalf("no key table: %v", err)
	}
	db := migratedDB(t)
	s, err := Open(ctx, db.DSN, kek, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	wrong, _ := newKEK(t)
	_, err = Open(ctx, db.DSN, wrong, Options{})
	if err == nil || !strings.Contains(err.Error(), "cannot decrypt the key table's root key") || !strings.Contains(err.Error(), kek.ID) {
		t.Fatalf("wrong KEK: %v", err)
	}
	db.Exec(t, "CREATE ROLE keys_nobody LOGIN")
	t.Cleanup(func() { db.Exec(t, "DROP OWNED BY keys_nobody; DROP ROLE keys_nobody") })
	_, err = Open(ctx, strings.Replace(db.DSN, "postgres@", "keys_nobody@", 1), kek, Options{ReadOnly: true})
	if err == nil || !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), "roles.sql") {
		t.Fatalf("no privilege: %v", err)
	}
	_, err = Open(ctx, "postgres://postgres@127.0.0.1:1/x?connect_timeout=2", kek, Options{})
	if err == nil || !usererr.IsRetryable(err) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("unreachable: %v", err)
	}
}

// TestKMSKEK runs the key table under a KEK in a real KMS-compatible server
// (local-kms on 127.0.0.1): the root is wrapped by the KMS, data keys are
// created and read back, and a KMS key that does not exist is one line.
func TestKMSKEK(t *testing.T) {
	srv := kmstest.Get(t)
	ctx := testCtx(t)
	kek, err := OpenKEK(ctx, srv.KEKURI())
	if err != nil {
		t.Fatal(err)
	}
	db := migratedDB(t)
	s, err := Open(ctx, db.DSN, kek, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := s.SubjectHash([]byte("kms-subject"))
	a, _, err := s.SealKey(ctx, "customers", sub, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ct, _ := a.Encrypt([]byte("v"), []byte("ad"))
	s.Close()
	again, err := Open(ctx, db.DSN, kek, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	b, err := again.DataKey(ctx, "customers", sub)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := b.Decrypt(ct, []byte("ad")); err != nil || string(pt) != "v" {
		t.Fatalf("decrypt after reopening: %v", err)
	}
	var kekCol string
	db.Conn(t).QueryRow(ctx, "SELECT kek FROM deltabus.key_root").Scan(&kekCol)
	if kekCol != srv.KEKURI() {
		t.Fatalf("key_root.kek = %q", kekCol)
	}
	// A file KEK cannot open a root the KMS wraps, and says which KEK can.
	fileKEK, _ := newKEK(t)
	if _, err := Open(ctx, db.DSN, fileKEK, Options{}); err == nil || !strings.Contains(err.Error(), srv.KEKURI()) {
		t.Fatalf("wrong KEK: %v", err)
	}
	missing, err := OpenKEK(ctx, strings.Replace(srv.KEKURI(), kmstest.KeyID, "00000000-0000-0000-0000-000000000000", 1))
	if err != nil {
		t.Fatal(err)
	}
	fresh := migratedDB(t)
	if _, err := Open(ctx, fresh.DSN, missing, Options{}); err == nil || !usererr.Is(err) ||
		!strings.Contains(err.Error(), "cannot wrap a new root key") || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("a KMS key that does not exist: %v", err)
	}
}
