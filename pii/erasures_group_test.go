package pii

import (
	"context"
	"testing"

	"github.com/deltabus/deltabus/pii/envelope"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/grouptest"
)

// TestCountSubjectInAGroup: the events of a topic of a topic group are
// counted in its group's table, its own rows only, though they share
// files with other topics holding envelopes of the same subject.
func TestCountSubjectInAGroup(t *testing.T) {
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var sub envelope.Subject
	sub[0] = 7
	var other envelope.Subject
	other[0] = 8
	of := func(s envelope.Subject) string { return `{"email":{` + string(envelope.SubjectNeedle(s)) + `}}` }
	grouptest.Group(t, root, "c", "customers.*")
	grouptest.Commit(t, root, "deltabus-main", 100,
		grouptest.Event("customers.eu", 100, 0, of(sub)), grouptest.Event("customers.us", 100, 1, of(sub)),
		grouptest.Event("customers.eu", 100, 2, of(other)), grouptest.Event("customers.us", 100, 3, of(sub)))
	grouptest.Commit(t, root, "deltabus-main", 200, grouptest.Event("customers.us", 200, 0, of(sub)))
	for topic, want := range map[string][2]int64{"customers.eu": {1, 2}, "customers.us": {3, 3}, "customers.none": {0, 0}} {
		n, total, err := CountSubject(ctx, root, topic, sub)
		if err != nil || n != want[0] || total != want[1] {
			t.Errorf("%s: %d of %d (%v), want %d of %d", topic, n, total, err, want[0], want[1])
		}
	}
}
