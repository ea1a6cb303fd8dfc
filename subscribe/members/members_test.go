package members_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe/members"
	"github.com/deltabus/deltabus/subscribe/members/memberstest"
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

func openGroups(t *testing.T, root storage.Store) (members.Source, func()) {
	gs := members.New(root, members.Options{PollInterval: 20 * time.Millisecond, SyncInterval: 50 * time.Millisecond, SnapshotEvery: 50})
	return gs, gs.Close
}

// TestGroupsConform: the in-process groups pass the suite on local disk.
func TestGroupsConform(t *testing.T) {
	memberstest.Run(t, localRoot, openGroups)
}

// TestGroupsConformOnS3: the same suite against a real S3 server.
func TestGroupsConformOnS3(t *testing.T) {
	memberstest.Run(t, func(t *testing.T) storage.Store {
		b := s3test.NewBucket(t)
		root, err := storage.Open(context.Background(), b.URL("bus"), b.Options())
		if err != nil {
			t.Fatal(err)
		}
		return root
	}, openGroups)
}
