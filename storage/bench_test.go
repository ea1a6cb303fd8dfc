package storage_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
)

// BenchmarkPutIfAbsent4KiB: sequential commit-sized conditional puts, the
// Delta commit path (local: temp + fsync + link + dir fsync; S3: PUT with
// If-None-Match on versitygw over loopback).
func BenchmarkPutIfAbsent4KiB(b *testing.B) {
	b.Run("local", func(b *testing.B) {
		l, err := storage.NewLocal(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		benchPutIfAbsent(b, l)
	})
	b.Run("versitygw", func(b *testing.B) {
		s, err := storage.NewS3(b.Context(), s3test.NewBucket(b).S3Config("bench"))
		if err != nil {
			b.Fatal(err)
		}
		benchPutIfAbsent(b, s)
	})
}

func benchPutIfAbsent(b *testing.B, s storage.Store) {
	data := bytes.Repeat([]byte("x"), 4096)
	b.SetBytes(int64(len(data)))
	i := 0
	for b.Loop() {
		key := fmt.Sprintf("t/_delta_log/%020d.json", i)
		if err := s.PutIfAbsent(b.Context(), key, data); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "ops/s")
}
