package topic

import (
	"testing"
	"unsafe"
)

// The topic bounds of a file are those of the rows appended, even when the
// caller reuses the memory of an appended event's topic (the bootstrap
// builds events in place from its COPY chunks): the bounds are copies.
func TestTopicBoundsOutliveTheCallersBuffer(t *testing.T) {
	st := newLocalStore(t)
	w := NewFileWriter(st, FileOptions{})
	buf := []byte("m.b")
	for i, ev := range testEvents(4, 1, 0x100) {
		buf[2] = "bcdb"[i]
		ev.Topic = unsafe.String(&buf[0], len(buf))
		if err := w.Append(&ev); err != nil {
			t.Fatal(err)
		}
	}
	copy(buf, "zzz")
	adds, err := w.Close(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]bool{"m.a": false, "m.b": true, "m.d": true, "m.e": false, "zzz": false} {
		if got := MayHold(adds[0].Stats, topic); got != want {
			t.Errorf("MayHold(%s) = %v, want %v (stats %s)", topic, got, want, adds[0].Stats)
		}
	}
}
