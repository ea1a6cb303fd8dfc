package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
)

// cutFlags are relay consume's whole-transaction mode: --topics reads
// several topics up to one source's resolved position, a transaction at a
// time (subscribe.ReadCut).
type cutFlags struct {
	topics string
	source string
	after  int64
}

// cutLine is one transaction as relay consume --topics prints it.
type cutLine struct {
	Source     string            `json:"source"`
	Xid        int64             `json:"xid"`
	CommitLSN  int64             `json:"commit_lsn"`
	CommitTime time.Time         `json:"commit_time"`
	Recorded   map[string]int64  `json:"recorded_topics,omitempty"` // its transaction record's counts
	Events     []json.RawMessage `json:"events"`
}

// resolvedLine ends each cut: where the next one starts (--after).
type resolvedLine struct {
	Source   string `json:"source"`
	Resolved int64  `json:"resolved"`
}

func (f cutFlags) topicList() []string {
	var out []string
	for _, t := range strings.Split(f.topics, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// runCuts prints cut after cut (until caught up, or for ever with follow).
func runCuts(ctx context.Context, store storage.Store, f cutFlags, follow bool, poll time.Duration, w io.Writer) error {
	enc := json.NewEncoder(w)
	o := subscribe.CutOptions{Topics: f.topicList(), Source: f.source, After: f.after}
	print := func(c *subscribe.Cut) error {
		for _, tx := range c.Transactions {
			line := cutLine{Source: tx.Source, Xid: tx.Xid, CommitLSN: tx.CommitLSN, CommitTime: tx.CommitTime}
			if tx.Record != nil {
				line.Recorded = tx.Record.Topics
			}
			for _, e := range tx.Events {
				b, err := json.Marshal(eventJSON(e))
				if err != nil {
					return err
				}
				line.Events = append(line.Events, b)
			}
			if err := enc.Encode(line); err != nil {
				return err
			}
		}
		return enc.Encode(resolvedLine{Source: c.Source, Resolved: c.Resolved})
	}
	if follow {
		return subscribe.Cuts(ctx, store, o, poll, print)
	}
	c, err := subscribe.ReadCut(ctx, store, o)
	if err != nil {
		return err
	}
	return print(c)
}

// cutEvent is an event of a transaction as relay consume --topics prints it.
type cutEvent struct {
	EventID       string          `json:"event_id"`
	Topic         string          `json:"topic"`
	Key           string          `json:"key"`
	Type          string          `json:"type"`
	SchemaVersion int32           `json:"schema_version"`
	Payload       json.RawMessage `json:"payload"`
	Headers       json.RawMessage `json:"headers"`
	OccurredAt    time.Time       `json:"occurred_at"`
	CommitLSN     int64           `json:"commit_lsn"`
	Seq           int32           `json:"seq"`
	Xid           int64           `json:"xid"`
	Source        string          `json:"source"`
}

func eventJSON(e outbox.Event) cutEvent {
	raw := func(s string) json.RawMessage {
		if json.Valid([]byte(s)) {
			return json.RawMessage(s)
		}
		b, _ := json.Marshal(s)
		return b
	}
	headers := json.RawMessage("null")
	if e.Headers != nil {
		headers = raw(*e.Headers)
	}
	return cutEvent{EventID: e.ID, Topic: e.Topic, Key: e.Key, Type: e.Type, SchemaVersion: e.SchemaVersion, Payload: raw(e.Payload),
		Headers: headers, OccurredAt: e.OccurredAt.UTC(), CommitLSN: e.CommitLSN, Seq: e.Seq, Xid: e.Xid, Source: e.Source}
}
