package topic

import (
	"encoding/json"
)

// TopicBounds returns the bounds of the topic column in a data file's
// add.stats; ok=false when the stats hold none (no stats, or a file
// written before topic bounds were).
func TopicBounds(stats string) (min, max string, ok bool) {
	if stats == "" {
		return "", "", false
	}
	var s struct {
		Min struct {
			Topic *string `json:"topic"`
		} `json:"minValues"`
		Max struct {
			Topic *string `json:"topic"`
		} `json:"maxValues"`
	}
	if json.Unmarshal([]byte(stats), &s) != nil || s.Min.Topic == nil || s.Max.Topic == nil {
		return "", "", false
	}
	return *s.Min.Topic, *s.Max.Topic, true
}

// MayHold reports whether the data file whose add.stats are stats may
// hold rows of topic: false only when the stats bound the topic column and
// topic is outside the bounds. A reader of one topic of a group's table
// (catalog.Placement) skips the files for which it is false, without
// reading them, and keeps, of the files it reads, the rows whose topic
// column is the topic. Files of a topic's own table, and files written
// before topic bounds were (no bounds), may always hold it.
func MayHold(stats, topic string) bool {
	lo, hi, ok := TopicBounds(stats)
	return !ok || (lo <= topic && topic <= hi)
}

// OnlyTopic reports whether the stats bound the file's topic column to
// topic alone: every row of the file is the topic's.
func OnlyTopic(stats, topic string) bool {
	lo, hi, ok := TopicBounds(stats)
	return ok && lo == topic && hi == topic
}

// MayHoldLSNs reports whether the data file whose add.stats are stats
// may hold rows of source (any source when "") whose commit_lsn is in
// [lo, hi]: false only when the stats bound commit_lsn outside the range,
// or bound the source column (every row having one) to exclude source.
// Readers of a source's rows past a position (a fork's phantoms, a
// consistent cut, transaction records) skip the files for which it is
// false without reading them.
func MayHoldLSNs(stats, source string, lo, hi int64) bool {
	if stats == "" {
		return true
	}
	var s struct {
		Min struct {
			CommitLSN *int64  `json:"commit_lsn"`
			Source    *string `json:"source"`
		} `json:"minValues"`
		Max struct {
			CommitLSN *int64  `json:"commit_lsn"`
			Source    *string `json:"source"`
		} `json:"maxValues"`
		NullCount map[string]int64 `json:"nullCount"`
	}
	if json.Unmarshal([]byte(stats), &s) != nil {
		return true
	}
	if (s.Max.CommitLSN != nil && *s.Max.CommitLSN < lo) || (s.Min.CommitLSN != nil && *s.Min.CommitLSN > hi) {
		return false
	}
	if lo, hi := s.Min.Source, s.Max.Source; source != "" && lo != nil && hi != nil && s.NullCount["source"] == 0 && (source < *lo || source > *hi) {
		return false
	}
	return true
}
