package topic

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// minMax is the running minimum and maximum of one numeric or timestamp
// column (timestamps in microseconds since the epoch).
type minMax struct {
	min, max int64
	ok       bool
}

func (m *minMax) add(v int64) {
	if !m.ok {
		m.min, m.max, m.ok = v, v, true
		return
	}
	if v < m.min {
		m.min = v
	}
	if v > m.max {
		m.max = v
	}
}

// fileStats accumulates the Delta statistics of one data file as rows are
// appended: the row count, the null count of every column, and min/max of
// every non-string column. Of the strings only topic and source get
// bounds, written exactly (no truncation: topic names and appIds are
// short): a reader of one topic of a group table skips the files whose
// topic bounds exclude it, and tells a file of one source (min = max) from
// one compaction merged from several. Payloads and ids get none: they are
// not useful for skipping and Delta string bounds need truncation rules.
type fileStats struct {
	rows   int64
	nulls  [numDeadLetterCols]int64
	bound  [numDeadLetterCols]minMax
	source stringBounds
	topic  stringBounds
	// ownSource: the writer's own source (FileOptions.Source) is within
	// source's bounds already (appendEvent adds it once per file).
	ownSource bool
}

// stringBounds are the exact minimum and maximum of a string column.
type stringBounds struct {
	min, max string
	ok       bool
}

// add widens the bounds to v. A bound is kept as a copy: v may alias a
// buffer its caller reuses (an event appended from a bootstrap's COPY
// chunk, an Arrow value of a file being compacted), and the bounds are
// written when the file is.
func (s *stringBounds) add(v string) {
	switch {
	case !s.ok:
		v = strings.Clone(v)
		s.min, s.max, s.ok = v, v, true
	case v == s.min || v == s.max:
	case v < s.min:
		s.min = strings.Clone(v)
	case v > s.max:
		s.max = strings.Clone(v)
	}
}

// addSource widens the source bounds to v.
func (s *fileStats) addSource(v string) { s.source.add(v) }

func (s *fileStats) reset() { *s = fileStats{} }

// statsTimeLayout is the Delta stats form of a timestamp: ISO-8601, UTC,
// milliseconds.
const statsTimeLayout = "2006-01-02T15:04:05.000Z"

// appendStatsTime appends micros as a millisecond ISO-8601 UTC timestamp,
// rounding down (floor) for a minimum and up (ceiling) for a maximum, so the
// written bounds always enclose the true microsecond values.
func appendStatsTime(b []byte, micros int64, roundUp bool) []byte {
	ms := micros / 1000
	if rem := micros % 1000; rem < 0 {
		ms-- // floor for times before 1970
		if roundUp {
			ms++
		}
	} else if rem > 0 && roundUp {
		ms++
	}
	return time.UnixMilli(ms).UTC().AppendFormat(b, statsTimeLayout)
}

// appendJSON appends the stats as the JSON text Delta stores in add.stats:
// {"numRecords":n,"minValues":{..},"maxValues":{..},"nullCount":{..}}.
func (s *fileStats) appendJSON(b []byte, cols []column) []byte {
	b = append(b, `{"numRecords":`...)
	b = strconv.AppendInt(b, s.rows, 10)
	b = s.appendBounds(b, `,"minValues":{`, cols, false)
	b = s.appendBounds(b, `,"maxValues":{`, cols, true)
	b = append(b, `,"nullCount":{`...)
	for i, c := range cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendKey(b, c.name)
		b = strconv.AppendInt(b, s.nulls[i], 10)
	}
	return append(b, "}}"...)
}

func (s *fileStats) appendBounds(b []byte, head string, cols []column, max bool) []byte {
	b = append(b, head...)
	first := true
	for _, sb := range [...]struct {
		name string
		b    *stringBounds
	}{{cols[colTopic].name, &s.topic}, {sourceColumn.name, &s.source}} {
		if !sb.b.ok {
			continue
		}
		v := sb.b.min
		if max {
			v = sb.b.max
		}
		q, _ := json.Marshal(v)
		if !first {
			b = append(b, ',')
		}
		b = appendKey(b, sb.name)
		b = append(b, q...)
		first = false
	}
	for i, c := range cols {
		m := s.bound[i]
		if c.kind == kindString || !m.ok {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendKey(b, c.name)
		v := m.min
		if max {
			v = m.max
		}
		if c.kind == kindTimestamp {
			b = append(b, '"')
			b = appendStatsTime(b, v, max)
			b = append(b, '"')
		} else {
			b = strconv.AppendInt(b, v, 10)
		}
	}
	return append(b, '}')
}

// appendKey appends `"name":`; column names are fixed identifiers that need
// no escaping.
func appendKey(b []byte, name string) []byte {
	b = append(b, '"')
	b = append(b, name...)
	return append(b, `":`...)
}
