package delta

import (
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// A writer keeps every active file's add action in memory for as long as
// the file is active, and its statistics are most of it: some 600 bytes of
// JSON for a topic file, against 200 for the rest of the entry. A table
// that commits a hundred times a second holds tens of thousands of them
// until compaction replaces them. So a Table keeps them packed: zstd with a
// built-in dictionary of the statistics this module's tables carry (their
// keys, the shape of their values), about 110 bytes each. Only the Table's
// own state holds packed statistics; every way out of it (Files, a
// checkpoint, StatsRecords) unpacks them, and snapshots loaded for readers
// never hold them.

// statsDict is the dictionary statistics are packed against: statistics
// as a topic's and a dead-letter table's files carry them. Changing it
// only changes how well new statistics pack: a packed string names no
// dictionary, and lives only in the process that packed it.
const statsDict = `{"numRecords":1,"minValues":{"topic":"orders","source":"deltabus-7315779080795741111-deltabus","schema_version":1,` +
	`"occurred_at":"2026-12-05T11:24:25.794Z","commit_lsn":30732960,"seq":0,"xid":741,"commit_time":"2026-12-05T11:24:25.798Z"},` +
	`"maxValues":{"topic":"orders","source":"deltabus-7315779080795741111-deltabus","schema_version":1,` +
	`"occurred_at":"2026-12-05T11:24:25.795Z","commit_lsn":30732960,"seq":0,"xid":741,"commit_time":"2026-12-05T11:24:25.799Z"},` +
	`"nullCount":{"event_id":0,"topic":0,"key":0,"type":0,"schema_version":0,"payload":0,"headers":1,"occurred_at":0,` +
	`"commit_lsn":0,"seq":0,"xid":0,"commit_time":0,"source":0,"dead_letter_reason":0,"source_table":0,"raw_row":0}}`

// packedMark starts packed statistics: a zstd frame follows. A plain
// string that starts with it (no statistics JSON does; a hostile writer's
// might) is always packed, so in a Table's state the mark means packed.
const packedMark = "\x00"

var statsCodec = sync.OnceValues(func() (*zstd.Encoder, *zstd.Decoder) {
	// One encoder and one decoder for the process (a call takes
	// microseconds; each more would hold a megabyte). The encoder's window
	// is what statistics need; the decoder's is not limited, as a frame of
	// a larger string (a wide table's statistics) needs a larger one and
	// it only ever reads what this process packed.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderDictRaw(1, []byte(statsDict)), zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(false), zstd.WithSingleSegment(true), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(64<<10))
	if err != nil {
		panic("delta: statistics encoder: " + err.Error()) // static options: cannot fail
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderDictRaw(1, []byte(statsDict)), zstd.WithDecoderConcurrency(1))
	if err != nil {
		panic("delta: statistics decoder: " + err.Error())
	}
	return enc, dec
})

// packStats returns stats packed, or stats itself when packing would not
// make it smaller.
func packStats(stats string) string {
	marked := strings.HasPrefix(stats, packedMark)
	if stats == "" || (len(stats) < 64 && !marked) {
		return stats
	}
	enc, _ := statsCodec()
	out := enc.EncodeAll([]byte(stats), []byte(packedMark))
	if len(out) >= len(stats) && !marked {
		return stats
	}
	return string(out)
}

// unpackStats returns the statistics JSON of stats, packed or not.
func unpackStats(stats string) string {
	if !strings.HasPrefix(stats, packedMark) {
		return stats
	}
	_, dec := statsCodec()
	out, err := dec.DecodeAll([]byte(stats[len(packedMark):]), nil)
	if err != nil {
		// Only this process packs, and only what it could read: a
		// failure is a bug, never input.
		panic("delta: unpack statistics: " + err.Error())
	}
	return string(out)
}

// packAdds returns acts with every add's statistics packed: copies of the
// adds, so the caller's actions (rendered into the log already) keep
// theirs. acts itself when no add has statistics.
func packAdds(acts []Action) []Action {
	var out []Action
	for i, a := range acts {
		if a.Add == nil || a.Add.Stats == "" {
			continue
		}
		if out == nil {
			out = slices.Clone(acts)
		}
		add := *a.Add
		add.Stats = packStats(add.Stats)
		out[i].Add = &add
	}
	if out == nil {
		return acts
	}
	return out
}

// packFiles packs the statistics of every active file of s, which from
// then on holds them packed: a Table's state.
func (s *Snapshot) packFiles() {
	if s.packedStats {
		return
	}
	s.packedStats = true
	for k, a := range s.Files {
		if p := packStats(a.Stats); p != a.Stats {
			a.Stats = p
			s.Files[k] = a
		}
	}
}

// statsOf returns the statistics JSON of a, one of s's active files.
func (s *Snapshot) statsOf(a *Add) string {
	if !s.packedStats {
		return a.Stats
	}
	return unpackStats(a.Stats)
}
