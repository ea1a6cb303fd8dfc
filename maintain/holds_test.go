package maintain

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/members"
)

// TestProtectedGroupHoldsRetention: log clean-up keeps every version a
// protected members group has not acknowledged, and records the hold;
// past the maximum hold the group is released, the log is cleaned and
// the group meets its RetentionError; once reset, it is protected again.
func TestProtectedGroupHoldsRetention(t *testing.T) {
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	write(t, root, []string{"orders"}, 130)
	gs := members.New(root, members.Options{})
	if _, err := gs.Reset(ctx, "g", "orders", subscribe.FromVersion(50)); err != nil {
		t.Fatal(err)
	}
	gs.Close()
	if err := members.Protect(ctx, root, "g", "orders", 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	run := func(at time.Duration) TableReport {
		t.Helper()
		rep, err := Run(ctx, root, Options{SkipCompact: true, LogRetention: time.Minute, FileRetention: time.Minute,
			Now: func() time.Time { return start.Add(at) }, Logger: slog.New(slog.DiscardHandler)})
		if err != nil || len(rep.Tables) != 1 || len(rep.Tables[0].Errors) > 0 {
			t.Fatalf("run: %+v %v", rep, err)
		}
		return rep.Tables[0]
	}
	earliest := func() int64 {
		view, err := subscribe.ListLog(ctx, storage.Sub(root, "orders"), 0)
		if err != nil {
			t.Fatal(err)
		}
		return view.First
	}

	tr := run(time.Hour)
	if tr.LogDeleted != 0 || len(tr.HeldFor) != 1 || earliest() > 50 {
		t.Fatalf("protected group at version 50: %+v, earliest %d; want nothing deleted and the hold recorded", tr, earliest())
	}
	list, err := members.List(ctx, root)
	if err != nil || len(list) != 1 || list[0].Hold == nil || list[0].Hold.Version != 50 || !list[0].Hold.Released.IsZero() {
		t.Fatalf("the hold in the store: %+v %v", list, err)
	}
	if text := list[0].ProtectionText(start.Add(2 * time.Hour)); text == "-" {
		t.Fatalf("protection text: %q", text)
	}

	tr = run(4 * time.Hour) // held since +1h, max hold 2h: past it
	if len(tr.Released) != 1 || tr.LogDeleted == 0 || earliest() != 100 {
		t.Fatalf("past the maximum hold: %+v, earliest %d; want the group released and the log cleaned to checkpoint 100", tr, earliest())
	}
	gs = members.New(root, members.Options{})
	defer gs.Close()
	_, err = gs.Receive(ctx, "g", "orders", members.ReceiveRequest{Member: "m", Wait: 2 * time.Second})
	var re *subscribe.RetentionError
	if !errors.As(err, &re) {
		t.Fatalf("receive of the released group: %v; want a RetentionError", err)
	}
	if _, err := gs.Reset(ctx, "g", "orders", subscribe.FromLatest()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	tr = run(5 * time.Hour)
	list, _ = members.List(ctx, root)
	if len(list) != 1 || list[0].Hold != nil || len(tr.Released) != 0 {
		t.Fatalf("after a reset: %+v %+v; want the group protected again, holding nothing", tr, list)
	}
}
