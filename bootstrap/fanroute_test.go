package bootstrap

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/deltabus/deltabus/decoding"
)

// topicStream is a COPY binary stream of two-column rows (topic text, i
// int8), row i of topic topicOf(i).
func topicStream(n int, topicOf func(i int) string) []byte {
	b := append([]byte{}, binCopySignature...)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, 0)
	for i := range n {
		topic := topicOf(i)
		b = binary.BigEndian.AppendUint16(b, 2)
		b = binary.BigEndian.AppendUint32(b, uint32(len(topic)))
		b = append(b, topic...)
		b = binary.BigEndian.AppendUint32(b, 8)
		b = binary.BigEndian.AppendUint64(b, uint64(i))
	}
	return binary.BigEndian.AppendUint16(b, 0xffff)
}

// routedRows runs a routed fan-out of stream over workers and returns
// the rows each worker got, as (topic, i).
func routedRows(t *testing.T, stream []byte, workers int) [][]routedRow {
	t.Helper()
	got := make([][]routedRow, workers)
	parsers := make([]*binRows, workers)
	for k := range parsers {
		parsers[k] = newBinRows(2, func(d []decoding.Datum) error {
			got[k] = append(got[k], routedRow{string(d[0].Data), binary.BigEndian.Uint64(d[1].Data)})
			return nil
		})
		parsers[k].header = true
	}
	if err := newFanOut(t.Context(), 2, workers, 0).run(copyInPieces(stream), parsers); err != nil {
		t.Fatal(err)
	}
	return got
}

type routedRow struct {
	topic string
	i     uint64
}

// checkDealt asserts every row reached one worker once, in stream order
// within each worker, and returns the workers each topic went to.
func checkDealt(t *testing.T, got [][]routedRow, n int) map[string][]int {
	t.Helper()
	seen := make([]bool, n)
	on := map[string][]int{}
	for k, rows := range got {
		for j, r := range rows {
			if r.i >= uint64(n) || seen[r.i] || (j > 0 && rows[j-1].i >= r.i) {
				t.Fatalf("worker %d: row %d again or out of order", k, r.i)
			}
			seen[r.i] = true
			if !slices.Contains(on[r.topic], k) {
				on[r.topic] = append(on[r.topic], k)
			}
		}
	}
	if i := slices.Index(seen, false); i >= 0 {
		t.Fatalf("row %d reached no worker", i)
	}
	return on
}

// TestFanOutRoutesTopics: with many topics of even sizes, each topic's
// rows all go to one worker, and the workers get about as many rows.
func TestFanOutRoutesTopics(t *testing.T) {
	withChunk(t, 4000)
	const n, workers, topics = 300_000, 2, 40
	got := routedRows(t, topicStream(n, func(i int) string { return fmt.Sprint("topic-", i%topics) }), workers)
	for topic, ws := range checkDealt(t, got, n) {
		if len(ws) != 1 {
			t.Errorf("%s went to workers %v, want one", topic, ws)
		}
	}
	for k, rows := range got {
		if len(rows)*workers*4 < n*3 {
			t.Errorf("worker %d got %d of %d rows", k, len(rows), n)
		}
	}
}

// TestFanOutSpreadsADominantTopic: when one topic is most of the rows,
// no assignment of topics is balanced: past the first window (routed),
// its rows are dealt to every worker.
func TestFanOutSpreadsADominantTopic(t *testing.T) {
	withChunk(t, 4000)
	const n, workers = 1_000_000, 2
	topicOf := func(i int) string {
		if i%10 == 0 {
			return fmt.Sprint("small-", i%7)
		}
		return "big"
	}
	got := routedRows(t, topicStream(n, topicOf), workers)
	if ws := checkDealt(t, got, n)["big"]; len(ws) != workers {
		t.Errorf("the dominant topic went to workers %v only", ws)
	}
	for k, rows := range got {
		if len(rows)*workers*4 < n*3 {
			t.Errorf("worker %d got %d of %d rows", k, len(rows), n)
		}
	}
}

// TestTopicRouteRebalances: topics first seen while their sizes are
// unknown are assigned again when the loads turn out uneven, and then
// stay put while the loads are even.
func TestTopicRouteRebalances(t *testing.T) {
	r := newTopicRoute(2)
	// Sizes 4, 3, 2, 1 met in that order: a (4) and c (2) land on worker
	// 0, b (3) and d (1) on worker 1, 6:4 — uneven past 5/4.
	sizes := map[string]int{"a": 4, "b": 3, "c": 2, "d": 1}
	for r.window == routeFirstWindow {
		for _, topic := range []string{"a", "b", "c", "d"} {
			r.worker([]byte(topic), sizes[topic]*100)
		}
	}
	if r.spread || r.of["a"].worker != r.of["d"].worker || r.of["b"].worker != r.of["c"].worker {
		t.Fatalf("after rebalancing: spread %t, a on %d, b on %d, c on %d, d on %d, want a with d, b with c",
			r.spread, r.of["a"].worker, r.of["b"].worker, r.of["c"].worker, r.of["d"].worker)
	}
	before := r.of["a"].worker
	for w := r.window; r.window == w; {
		for _, topic := range []string{"a", "b", "c", "d"} {
			r.worker([]byte(topic), sizes[topic]*100)
		}
	}
	if r.spread || r.of["a"].worker != before {
		t.Fatalf("an even window moved topic a or spread (%t)", r.spread)
	}
}
