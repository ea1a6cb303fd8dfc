package topic

import (
	"encoding/json"
)

// MayHold reports whether the data file whose add.stats are stats may
// hold rows of topic: false only when the stats bound the topic column and
// topic is outside the bounds. A reader of one topic of a group's table
// (catalog.Placement) skips the files for which it is false, without
// reading them, and keeps, of the files it reads, the rows whose topic
// column is the topic. Files of a topic's own table, and files written
// before topic bounds were (no bounds), may always hold it.
func MayHold(stats, topic string) bool {
	if stats == "" {
		return true
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
		return true
	}
	return *s.Min.Topic <= topic && topic <= *s.Max.Topic
}
