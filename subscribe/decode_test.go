package subscribe

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// TestDecodeEventsMatchesTopicReader: the column decoder gives exactly the
// events sink/topic's reader gives, NULLs included, across row groups and
// chunk boundaries, for event and dead-letter files.
func TestDecodeEventsMatchesTopicReader(t *testing.T) {
	root := localRoot(t)
	ctx := context.Background()
	for _, name := range []string{"orders", outbox.DeadLetterTopic} {
		tt := newTestTopic(t, root, name)
		tt.commit(3000, 2500)
		st := storage.Sub(root, name)
		acts, err := readCommit(ctx, st, 1)
		if err != nil {
			t.Fatal(err)
		}
		files := 0
		for _, a := range acts {
			if a.Add == nil {
				continue
			}
			files++
			var want, got []outbox.Event
			if err := topic.ReadEvents(ctx, st, *a.Add, func(e outbox.Event) error { want = append(want, e); return nil }); err != nil {
				t.Fatal(err)
			}
			data, err := st.Get(ctx, a.Add.Path)
			if err != nil {
				t.Fatal(err)
			}
			// Fresh buffers, then recycled ones (twice: the second file
			// reuses what the first freed).
			reuse := &decodeReuse{chunks: make(chan *chunk, 4)}
			for pass, r := range []*decodeReuse{nil, reuse, reuse} {
				got = got[:0]
				err := decodeEvents(ctx, data, r, func(c *chunk) error {
					got = c.appendEvents(got)
					if r != nil {
						select {
						case r.chunks <- c:
						default:
						}
					}
					return nil
				})
				if err != nil {
					t.Fatalf("%s pass %d: decodeEvents: %v", name, pass, err)
				}
				if len(got) != len(want) {
					t.Fatalf("%s pass %d: %d events decoded, topic reader %d", name, pass, len(got), len(want))
				}
				for i := range want {
					if !reflect.DeepEqual(got[i], want[i]) {
						t.Fatalf("%s pass %d event %d:\n got %+v\nwant %+v", name, pass, i, got[i], want[i])
					}
				}
			}
		}
		if files != 2 {
			t.Fatalf("%s: %d files, want 2", name, files)
		}
	}
}

// TestDecodeEventsRefusesCorruptFiles: garbage and truncated files are
// errors (never panics), and a file of another layout asks for the
// fallback reader.
func TestDecodeEventsRefusesCorruptFiles(t *testing.T) {
	root := localRoot(t)
	ctx := context.Background()
	tt := newTestTopic(t, root, "orders")
	tt.commit(100, 100)
	st := storage.Sub(root, "orders")
	acts, _ := readCommit(ctx, st, 1)
	var data []byte
	for _, a := range acts {
		if a.Add != nil {
			data, _ = st.Get(ctx, a.Add.Path)
		}
	}
	none := func(*chunk) error { return nil }
	for _, bad := range [][]byte{[]byte("not parquet"), data[:len(data)/2], append(append([]byte{}, data[:len(data)-100]...), data[len(data)-8:]...)} {
		if err := decodeEvents(ctx, bad, nil, none); err == nil || errors.Is(err, errLayout) {
			t.Errorf("corrupt file (%d bytes): %v", len(bad), err)
		}
	}
	flipped := append([]byte{}, data...)
	for i := 4; i < len(flipped)/3; i += 97 {
		flipped[i] ^= 0x5a
	}
	_ = decodeEvents(ctx, flipped, nil, none) // must not panic
}

// TestOtherWritersLayoutIsReadThroughArrow: a data file whose timestamps
// are milliseconds (another engine's choice) is not the decoder's layout;
// the subscription reads it with sink/topic's reader and delivers it.
func TestOtherWritersLayoutIsReadThroughArrow(t *testing.T) {
	root := localRoot(t)
	ctx := context.Background()
	tt := newTestTopic(t, root, "orders")
	st := storage.Sub(root, "orders")
	data := millisFile(t)
	if err := decodeEvents(ctx, data, nil, func(*chunk) error { return nil }); !errors.Is(err, errLayout) {
		t.Fatalf("decodeEvents on a millisecond file: %v, want errLayout", err)
	}
	if err := st.Put(ctx, "other.parquet", data); err != nil {
		t.Fatal(err)
	}
	tt.rawCommit(1, []delta.Action{{Add: &delta.Add{Path: "other.parquet", Size: int64(len(data)), DataChange: true, PartitionValues: map[string]*string{}}}})
	var c collector
	if err := Subscribe(ctx, root, "orders", "g", c.handle, Options{}); err != nil {
		t.Fatal(err)
	}
	if len(c.events) != 2 || c.events[1].ID != "b" || c.events[1].CommitTime.UnixMilli() != 1_700_000_000_123 {
		t.Fatalf("events %+v", c.events[len(c.events)-1].Event)
	}
}

// millisFile writes two events with the topic schema but millisecond
// timestamps.
func millisFile(t *testing.T) []byte {
	t.Helper()
	ms := &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}
	var fields []arrow.Field
	for _, f := range topic.ArrowSchema(false).Fields() {
		if f.Type.ID() == arrow.TIMESTAMP {
			f.Type = ms
		}
		fields = append(fields, f)
	}
	sc := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i, id := range []string{"a", "b"} {
		for c, f := range sc.Fields() {
			switch bl := b.Field(c).(type) {
			case *array.StringBuilder:
				v := id + "-" + f.Name
				if f.Name == "event_id" {
					v = id
				}
				bl.Append(v)
			case *array.Int32Builder:
				bl.Append(int32(i))
			case *array.Int64Builder:
				bl.Append(int64(100 + i))
			case *array.TimestampBuilder:
				bl.Append(arrow.Timestamp(1_700_000_000_000 + 123*int64(i)))
			}
		}
	}
	return parquetFile(t, b)
}
