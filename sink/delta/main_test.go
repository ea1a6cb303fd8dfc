package delta

import (
	"os"
	"testing"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
)

func TestMain(m *testing.M) { os.Exit(s3test.Run(m)) }

// bothStores runs fn on a fresh table root on the local filesystem
// (storage.Local) and on a versitygw bucket (storage.S3).
func bothStores(t *testing.T, fn func(t *testing.T, store storage.Store)) {
	t.Run("local", func(t *testing.T) {
		st, err := storage.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		fn(t, storage.Sub(st, "orders"))
	})
	t.Run("s3", func(t *testing.T) {
		st, err := storage.NewS3(t.Context(), s3test.NewBucket(t).S3Config("root"))
		if err != nil {
			t.Fatal(err)
		}
		fn(t, storage.Sub(st, "orders"))
	})
}
