package keys

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/pgcluster"
)

// TestKeyWriteWaitsForSynchronousStandby: where the key table's server
// names synchronous standbys, a new key is not handed out before they
// have it (the key writes run with synchronous_commit on, whatever the
// server's default: this cluster's is off), so a failover to one of them
// cannot lose a key whose ciphertext reached the store.
func TestKeyWriteWaitsForSynchronousStandby(t *testing.T) {
	ctx := testCtx(t)
	srv, err := pgcluster.StartServer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	admin, err := pgx.Connect(ctx, srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := migrations.ApplyKeys(ctx, admin); err != nil {
		t.Fatal(err)
	}
	kek, _ := newKEK(t)
	s, err := Open(ctx, srv.DSN("postgres"), kek, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	setStandbys := func(names string) {
		t.Helper()
		if _, err := admin.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '"+names+"'"); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond) // the reload reaches the backends
	}
	setStandbys("deltabus_standby")
	sub, _ := s.SubjectHash([]byte("customer-1"))
	done := make(chan error, 1)
	go func() {
		_, _, err := s.SealKey(ctx, "customers", sub, time.Now())
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a key was handed out while no synchronous standby had it: %v", err)
	case <-time.After(3 * time.Second):
	}
	setStandbys("") // the standby requirement lifted: the waiting commit completes
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the key write did not complete once no standby was required")
	}
}
