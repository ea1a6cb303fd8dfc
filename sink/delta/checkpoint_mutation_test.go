package delta

import (
	"context"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCheckpointMutations feeds deterministic random byte mutations of real
// checkpoints to the reader (the writers' load and the readers'): each must return (error or actions) within 5 s
// and never crash the process (arrow-go reads on its own goroutines, where a
// panic cannot be recovered).
func TestCheckpointMutations(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 30
	}
	for _, p := range []string{"delta-checkpoint/_delta_log/00000000000000000010.checkpoint.parquet", "kernelrs-app-txn-checkpoint/_delta_log/00000000000000000001.checkpoint.parquet", "deltars-delta-0.2.0/_delta_log/00000000000000000003.checkpoint.parquet"} {
		data, err := os.ReadFile(filepath.Join(conformanceDir(t), p))
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewSource(2))
		for i := 0; i < n; i++ {
			m := append([]byte(nil), data...)
			for k := 0; k < 1+r.Intn(4); k++ {
				m[r.Intn(len(m))] = byte(r.Intn(256))
			}
			done := make(chan struct{})
			start := time.Now()
			go func() {
				ParseCheckpoint(context.Background(), m)
				parseCheckpoint(context.Background(), m, false)
				close(done)
			}()
			select {
			case <-done:
				if d := time.Since(start); d > 500*time.Millisecond {
					t.Logf("iter %d slow %v", i, d)
				}
			case <-time.After(5 * time.Second):
				os.WriteFile(filepath.Join(t.TempDir(), "hang.parquet"), m, 0o644)
				t.Fatalf("iter %d hangs", i)
			}
		}
	}
}
