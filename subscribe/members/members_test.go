package members_test

import (
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
