package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// WatermarkPrefix is the logical message prefix of rebuild watermarks,
// written with pg_logical_emit_message(true, WatermarkPrefix, <JSON>).
const WatermarkPrefix = "deltabus.rebuild"

// Watermark ops.
const (
	WatermarkPause  = "pause"
	WatermarkCommit = "commit"
	WatermarkAbort  = "abort"
)

// MaxWatermarkSize bounds the content the relay parses: a real watermark
// is about 150 bytes.
const MaxWatermarkSize = 1024

// Watermark is the content of a rebuild logical message. It is a request,
// not a command: the relay acts on it only when the intent it names allows
// it (Intent.Allows).
type Watermark struct {
	Op    string `json:"op"`
	ID    string `json:"id"` // the intent's id
	Topic string `json:"topic"`
	AppID string `json:"appId"`
}

// ErrMalformedWatermark is wrapped by ParseWatermark's errors. Its message
// never quotes the content, which anyone may have written.
var ErrMalformedWatermark = errors.New("malformed rebuild watermark")

// ParseWatermark parses and validates a watermark's content: at most
// MaxWatermarkSize bytes of JSON with exactly the known fields, a known op
// and valid names.
func ParseWatermark(content []byte) (Watermark, error) {
	var wm Watermark
	if len(content) > MaxWatermarkSize {
		return wm, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformedWatermark, len(content), MaxWatermarkSize)
	}
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&wm); err != nil || dec.More() {
		return Watermark{}, fmt.Errorf("%w: %d bytes that are not a watermark object", ErrMalformedWatermark, len(content))
	}
	switch {
	case wm.Op != WatermarkPause && wm.Op != WatermarkCommit && wm.Op != WatermarkAbort:
		return Watermark{}, fmt.Errorf("%w: unknown op", ErrMalformedWatermark)
	case CheckName("topic", wm.Topic) != nil, CheckName("relay", wm.AppID) != nil, CheckID(wm.ID) != nil:
		return Watermark{}, fmt.Errorf("%w: invalid topic, appId or id", ErrMalformedWatermark)
	}
	return wm, nil
}

// Encode renders the watermark as the logical message's content.
func (wm Watermark) Encode() string {
	b, _ := json.Marshal(wm)
	return string(b)
}
