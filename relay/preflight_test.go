package relay

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/sinktest"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// silentStore is a store whose reads never answer: they wait for their
// context, as a request to a server that went silent does until its
// deadline.
type silentStore struct{ storage.Store }

func (silentStore) Get(ctx context.Context, key string) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestPreflightPublicationErrorDoesNotWaitForTheStore: the store's marker
// is read beside the publication check; when the check fails, its error
// is returned at once, not after a store that does not answer gives up.
func TestPreflightPublicationErrorDoesNotWaitForTheStore(t *testing.T) {
	db := pgtest.NewDB(t) // no publication
	local, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Source: db.DSN, Store: "file:///x", Slot: "s"}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := New(cfg, silentStore{local}, func(string) sink.Sink { return sinktest.NewMemory() }, outbox.Mappings{}, log, nil)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sql, err := pgsource.ConnectBounded(ctx, db.DSN, pgsource.QueryTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer sql.Close(ctx)
	repl := dialReplication(ctx, db.DSN)
	defer repl.discard()

	began := time.Now()
	_, err = r.preflight(ctx, ctx, sql, repl)
	if err == nil || !strings.Contains(err.Error(), "publication deltabus does not exist") {
		t.Fatalf("preflight without a publication: %v", err)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("the publication's error came after %v: it waited for the silent store", d)
	}
}
