package serve_test

import (
	"context"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe/members"
	"github.com/deltabus/deltabus/subscribe/members/memberstest"
	"github.com/deltabus/deltabus/subscribe/serve"
	"github.com/deltabus/deltabus/tests/s3test"
)

func TestMain(m *testing.M) { os.Exit(s3test.Run(m)) }

func localRoot(t *testing.T) storage.Store {
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// startServer serves the groups of root over HTTP on a loopback port.
func startServer(t *testing.T, root storage.Store, cfg serve.Config) (*httptest.Server, *members.Groups) {
	gs := members.New(root, members.Options{PollInterval: 20 * time.Millisecond, SyncInterval: 50 * time.Millisecond, SnapshotEvery: 50})
	cfg.Groups = gs
	srv := httptest.NewServer(serve.New(cfg))
	return srv, gs
}

func openHTTP(t *testing.T, root storage.Store) (members.Source, func()) {
	srv, gs := startServer(t, root, serve.Config{})
	return serve.NewClient(srv.URL, "", nil), func() { srv.Close(); gs.Close() }
}

// TestClientConforms: members over HTTP pass the suite the in-process
// groups pass, on local disk and on S3.
func TestClientConforms(t *testing.T) {
	memberstest.Run(t, localRoot, openHTTP)
}

func TestClientConformsOnS3(t *testing.T) {
	memberstest.Run(t, func(t *testing.T) storage.Store {
		b := s3test.NewBucket(t)
		root, err := storage.Open(context.Background(), b.URL("bus"), b.Options())
		if err != nil {
			t.Fatal(err)
		}
		return root
	}, openHTTP)
}
