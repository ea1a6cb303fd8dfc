package decoding

import (
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// BenchmarkDecode decodes captured real streams (see capture_test.go) with a
// fresh Decoder per pass, as a relay would after reconnecting.
func BenchmarkDecode(b *testing.B) {
	for _, c := range []struct{ name, path string }{{"single_row_tx", captureSingle}, {"batch_tx", captureBatch}} {
		b.Run(c.name, func(b *testing.B) {
			msgs := loadFrames(b, c.path)
			size, rows := 0, countRows(b, msgs)
			for _, m := range msgs {
				size += len(m)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				d := NewDecoder()
				for _, m := range msgs {
					if _, err := d.Decode(m); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(rows*b.N)/time.Since(start).Seconds(), "rows/s")
			b.ReportMetric(0, "ns/op") // per pass; rows/s is the figure that matters
		})
	}
}

// BenchmarkPglogreplParse runs pglogrepl.Parse over the same streams, for
// comparison with Decode (which does not copy datums and checks bounds).
func BenchmarkPglogreplParse(b *testing.B) {
	for _, c := range []struct{ name, path string }{{"single_row_tx", captureSingle}, {"batch_tx", captureBatch}} {
		b.Run(c.name, func(b *testing.B) {
			msgs := loadFrames(b, c.path)
			rows := countRows(b, msgs)
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				for _, m := range msgs {
					if _, err := pglogrepl.Parse(m); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(rows*b.N)/time.Since(start).Seconds(), "rows/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func BenchmarkParseTimestamptz(b *testing.B) {
	in := []byte("2026-11-30 13:18:59.123456+05:30")
	b.Run("ParseTimestamptz", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ParseTimestamptz(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeValue", func(b *testing.B) {
		m, col := NewDecoder().TypeMap(), Column{Name: "occurred_at", TypeOID: 1184}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeValue(m, col, text(string(in))); err != nil {
				b.Fatal(err)
			}
		}
	})
}
