package catalog

import (
	"errors"
	"strings"
	"testing"
)

func TestParseWatermark(t *testing.T) {
	good := Watermark{Op: WatermarkPause, ID: NewID(), Topic: "orders", AppID: "deltabus-main"}
	got, err := ParseWatermark([]byte(good.Encode()))
	if err != nil || got != good {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for name, content := range map[string]string{
		"not json":       "pause orders",
		"unknown field":  `{"op":"pause","id":"0123abcd","topic":"orders","appId":"deltabus-main","x":1}`,
		"unknown op":     `{"op":"drop","id":"0123abcd","topic":"orders","appId":"deltabus-main"}`,
		"empty id":       `{"op":"abort","id":"","topic":"orders","appId":"deltabus-main"}`,
		"path in topic":  `{"op":"pause","id":"0123abcd","topic":"../x","appId":"deltabus-main"}`,
		"two objects":    `{"op":"pause","id":"0123abcd","topic":"orders","appId":"deltabus-main"}{}`,
		"oversize":       `{"op":"pause","id":"0123abcd","topic":"orders","appId":"` + strings.Repeat("a", 2000) + `"}`,
		"uppercase hex":  `{"op":"pause","id":"0123ABCD","topic":"orders","appId":"deltabus-main"}`,
		"array":          `[1,2]`,
		"secret content": `{"op":"pause","id":"password=hunter2","topic":"orders","appId":"deltabus-main"}`,
	} {
		_, err := ParseWatermark([]byte(content))
		if !errors.Is(err, ErrMalformedWatermark) {
			t.Errorf("%s: err = %v, want ErrMalformedWatermark", name, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "orders") {
			t.Errorf("%s: the error echoes the content: %v", name, err)
		}
	}
}

func TestIntentAllows(t *testing.T) {
	id := NewID()
	rebuild := Intent{ID: id, Topic: "orders", AppID: "deltabus-main", Kind: IntentRebuild}
	abort := Intent{ID: id, Topic: "orders", AppID: "deltabus-main", Kind: IntentAbort}
	wm := func(op string) Watermark { return Watermark{Op: op, ID: id, Topic: "orders", AppID: "deltabus-main"} }
	for _, op := range []string{WatermarkPause, WatermarkCommit, WatermarkAbort} {
		if !rebuild.Allows(wm(op)) {
			t.Errorf("a rebuild intent refuses its own %s", op)
		}
	}
	if abort.Allows(wm(WatermarkPause)) || abort.Allows(wm(WatermarkCommit)) || !abort.Allows(wm(WatermarkAbort)) {
		t.Error("an abort intent allows only an abort")
	}
	other := wm(WatermarkPause)
	other.Topic = "payments"
	if rebuild.Allows(other) {
		t.Error("an intent for orders allowed a watermark for payments")
	}
	other = wm(WatermarkPause)
	other.AppID = "deltabus-other"
	if rebuild.Allows(other) {
		t.Error("an intent of one relay allowed another relay's watermark")
	}
}
