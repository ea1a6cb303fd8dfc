package topic

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/parquetpage"
)

const (
	benchEvents  = 1_000_000
	benchPerFile = 1_000
)

// eventGen fills one reused Event with the i-th benchmark event: unique id,
// a ~210-byte JSON payload that varies per row, headers on half the rows.
type eventGen struct {
	ev  outbox.Event
	buf []byte
	hdr string
}

func (g *eventGen) next(i int) *outbox.Event {
	b := append(g.buf[:0], "00000000-0000-4000-8000-"...)
	b = append(b, "000000000000"[len(strconv.Itoa(i)):]...)
	b = strconv.AppendInt(b, int64(i), 10)
	g.ev.ID = string(b)
	b = append(g.buf[:0], `{"order_id":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `,"customer":{"id":`...)
	b = strconv.AppendInt(b, int64(i%9973), 10)
	b = append(b, `,"tier":"gold"},"items":[{"sku":"SKU-`...)
	b = strconv.AppendInt(b, int64(i%541), 10)
	b = append(b, `","qty":`...)
	b = strconv.AppendInt(b, int64(i%7+1), 10)
	b = append(b, `,"price":`...)
	b = strconv.AppendInt(b, int64(i%10007), 10)
	b = append(b, `.99}],"currency":"EUR","channel":"web","note":"benchmark payload row"}`...)
	g.ev.Payload = string(b)
	g.buf = b
	g.ev.Headers = nil
	if i%2 == 0 {
		g.ev.Headers = &g.hdr
	}
	g.ev.Topic, g.ev.Key, g.ev.Type, g.ev.SchemaVersion = "orders", "order-"+strconv.Itoa(i%9973), "OrderPlaced", 1
	g.ev.OccurredAt = base.Add(time.Duration(i) * 37 * time.Microsecond)
	g.ev.CommitLSN, g.ev.Seq, g.ev.Xid = 0x1000000+int64(i/1000)*0x2000, int32(i%1000), 5000+int64(i/1000)
	g.ev.CommitTime = base.Add(time.Duration(i/1000) * time.Millisecond)
	return &g.ev
}

func newGen() *eventGen {
	return &eventGen{hdr: `{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`}
}

// writeTopicFiles writes benchEvents events as files of benchPerFile rows,
// one FileWriter + Close (upload with fsync) per file, as the relay does
// for 1000-row source batches. It returns the bytes stored.
func writeTopicFiles(b *testing.B) int64 {
	st := newLocalStore(b)
	g := newGen()
	var total int64
	for f := 0; f < benchEvents/benchPerFile; f++ {
		w := NewFileWriter(st, FileOptions{})
		for i := f * benchPerFile; i < (f+1)*benchPerFile; i++ {
			if err := w.Append(g.next(i)); err != nil {
				b.Fatal(err)
			}
		}
		adds, err := w.Close(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		total += adds[0].Size
	}
	return total
}

// writeOneArrowFile writes the same events with plain arrow-go: builders,
// 64Ki-row record batches, one snappy parquet file, fsync.
func writeOneArrowFile(b *testing.B, dir string) int64 {
	f, err := os.Create(filepath.Join(dir, "one.parquet"))
	if err != nil {
		b.Fatal(err)
	}
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithMaxRowGroupLength(64<<10))
	pw, err := pqarrow.NewFileWriter(eventSchema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		b.Fatal(err)
	}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, eventSchema)
	defer rb.Release()
	g := newGen()
	for i := 0; i < benchEvents; i++ {
		appendArrow(rb, g.next(i))
		if (i+1)%(64<<10) == 0 || i == benchEvents-1 {
			rec := rb.NewRecordBatch()
			if err := pw.Write(rec); err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
	}
	if err := pw.Close(); err != nil { // closes f
		b.Fatal(err)
	}
	fi, err := os.Stat(f.Name())
	if err != nil {
		b.Fatal(err)
	}
	g2, err := os.OpenFile(f.Name(), os.O_RDWR, 0)
	if err == nil {
		err = g2.Sync()
		g2.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// appendArrow appends e with arrow-go's builders, as a plain arrow-go
// program would.
func appendArrow(rb *array.RecordBuilder, e *outbox.Event) {
	f := rb.Fields()
	f[colEventID].(*array.StringBuilder).Append(e.ID)
	f[colTopic].(*array.StringBuilder).Append(e.Topic)
	f[colKey].(*array.StringBuilder).Append(e.Key)
	f[colType].(*array.StringBuilder).Append(e.Type)
	f[colSchemaVersion].(*array.Int32Builder).Append(e.SchemaVersion)
	f[colPayload].(*array.StringBuilder).Append(e.Payload)
	if e.Headers == nil {
		f[colHeaders].AppendNull()
	} else {
		f[colHeaders].(*array.StringBuilder).Append(*e.Headers)
	}
	f[colOccurredAt].(*array.TimestampBuilder).Append(arrow.Timestamp(e.OccurredAt.UnixMicro()))
	f[colCommitLSN].(*array.Int64Builder).Append(e.CommitLSN)
	f[colSeq].(*array.Int32Builder).Append(e.Seq)
	f[colXid].(*array.Int64Builder).Append(e.Xid)
	f[colCommitTime].(*array.TimestampBuilder).Append(arrow.Timestamp(e.CommitTime.UnixMicro()))
}

// BenchmarkFilesVsOneArrowFile writes 1M events as 1,000 files of 1,000
// rows through FileWriter (stats, upload with fsync via storage.Local), and
// the same rows with plain arrow-go as one parquet file on the same disk,
// side by side, and reports both rates, their ratio and bytes per event.
// Run with -benchtime=1x: one iteration writes 2M rows.
func BenchmarkFilesVsOneArrowFile(b *testing.B) {
	var topicDur, arrowDur, topicCPU, arrowCPU time.Duration
	var topicBytes, arrowBytes int64
	iters := 0
	for b.Loop() {
		t0, c0 := time.Now(), cpuTime()
		topicBytes = writeTopicFiles(b)
		topicDur, topicCPU = topicDur+time.Since(t0), topicCPU+cpuTime()-c0
		t0, c0 = time.Now(), cpuTime()
		arrowBytes = writeOneArrowFile(b, b.TempDir())
		arrowDur, arrowCPU = arrowDur+time.Since(t0), arrowCPU+cpuTime()-c0
		iters++
	}
	events := float64(benchEvents * iters)
	b.ReportMetric(events/topicDur.Seconds(), "files-events/s")
	b.ReportMetric(events/arrowDur.Seconds(), "onefile-events/s")
	b.ReportMetric(arrowDur.Seconds()/topicDur.Seconds(), "files/onefile-speed")
	// CPU seconds (user+sys of the process) are steadier than wall time
	// on a shared machine.
	b.ReportMetric(arrowCPU.Seconds()/topicCPU.Seconds(), "files/onefile-cpu-speed")
	b.ReportMetric(float64(topicBytes)/benchEvents, "files-B/event")
	b.ReportMetric(float64(arrowBytes)/benchEvents, "onefile-B/event")
}

// BenchmarkAppend is the per-event cost of Append into one large file
// (row groups flushed as they fill), with allocations per event.
func BenchmarkAppend(b *testing.B) {
	w := NewFileWriter(newLocalStore(b), FileOptions{})
	defer w.Abort()
	g := newGen()
	evs := make([]outbox.Event, 4096)
	for i := range evs {
		evs[i] = *g.next(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := w.Append(&evs[i%len(evs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "events/s")
}

// cpuTime is the user+system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEncodeVsPqarrow encodes the same row groups of eventGen events,
// one per file, with parquetpage (as FileWriter does) and with
// pqarrow.FileWriter over Arrow arrays wrapping the same buffers (as
// FileWriter did before), alternating in the same run so both see the
// same machine, and reports the CPU time (user+system of the process, GC
// included: steadier than wall time on a shared machine) of each per row
// (filling the buffers is not counted), their ratio and the bytes per row.
func BenchmarkEncodeVsPqarrow(b *testing.B) {
	for _, rows := range []int{1000, 65536} {
		b.Run(strconv.Itoa(rows), func(b *testing.B) {
			rg, g, props := new(pendingRows), newGen(), pqarrowProps(rows)
			var st fileStats
			var buf bytes.Buffer
			fill := func() {
				for i := range rows {
					rg.appendEvent(g.next(i), "deltabus-1-bench", true, colSource, &st)
				}
			}
			var direct, viaArrow time.Duration
			var directBytes, arrowBytes int
			for b.Loop() {
				fill()
				buf.Reset()
				runtime.GC() // neither side pays for the other's garbage
				t0 := cpuTime()
				f := parquetpage.NewFile(eventEncoding, &buf)
				if err := rg.encode(f, numEventCols); err != nil {
					b.Fatal(err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
				direct += cpuTime() - t0
				directBytes = buf.Len()

				fill()
				buf.Reset()
				runtime.GC()
				t0 = cpuTime()
				pw, err := pqarrow.NewFileWriter(eventSchema, &buf, props, pqarrow.DefaultWriterProps())
				if err != nil {
					b.Fatal(err)
				}
				rec := recordOf(eventSchema, rg)
				err = pw.Write(rec)
				rec.Release()
				rg.release()
				if err != nil || pw.Close() != nil {
					b.Fatal(err)
				}
				viaArrow += cpuTime() - t0
				arrowBytes = buf.Len()
			}
			n := float64(b.N * rows)
			b.ReportMetric(float64(direct.Nanoseconds())/n, "parquetpage-cpu-ns/row")
			b.ReportMetric(float64(viaArrow.Nanoseconds())/n, "pqarrow-cpu-ns/row")
			b.ReportMetric(viaArrow.Seconds()/direct.Seconds(), "cpu-ratio")
			b.ReportMetric(float64(directBytes)/float64(rows), "parquetpage-B/row")
			b.ReportMetric(float64(arrowBytes)/float64(rows), "pqarrow-B/row")
		})
	}
}
