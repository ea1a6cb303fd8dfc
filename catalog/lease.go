package catalog

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// Lease says that a writer has data files in flight: uploaded, or being
// uploaded, to the topics it names and not committed yet. VACUUM deletes a
// file no snapshot references once it is older than the table's file
// retention; a bootstrap (hours of upload, one commit at the end) or a
// large transaction outlives a short retention, and another relay's
// maintenance would delete its files before they are committed. Maintenance
// keeps every unreferenced file written since the Since of a live lease
// (InFlightSince), whoever holds it.
type Lease struct {
	Holder string `json:"holder"` // who writes: a relay's appId, or a bootstrap's
	// Topics the files go to; empty: any topic.
	Topics []string `json:"topics,omitempty"`
	// Since: files the holder has in flight were written at or after it.
	Since time.Time `json:"since"`
	// Expires: past it the lease is void (a holder that died); holders
	// renew it well before.
	Expires time.Time `json:"expires"`
}

// LeaseName is the lease holder name of one job of a relay ("bootstrap",
// "rebuild"): appID.job, the appId shortened if the name would be too long.
func LeaseName(appID, job string) string {
	if room := 128 - len(job) - 1; len(appID) > room {
		appID = appID[:room]
	}
	return appID + "." + job
}

// LeaseClockSlack is how much earlier than a lease's Since a file's
// modification time (the storage server's clock) may be and still be
// protected: the holder's clock and the server's may disagree.
const LeaseClockSlack = 5 * time.Minute

// WriteLease stores (or renews) a lease.
func WriteLease(ctx context.Context, store storage.Store, l Lease) error {
	if err := writeJSON(ctx, store, l, KindLease, l.Holder); err != nil {
		return fmt.Errorf("write lease: %w", err)
	}
	return nil
}

// DeleteLease removes a holder's lease once its files are committed.
func DeleteLease(ctx context.Context, store storage.Store, holder string) error {
	return deleteObject(ctx, store, KindLease, holder)
}

// ListLeases returns every lease in the store, live or expired.
func ListLeases(ctx context.Context, store storage.Store) ([]Lease, error) {
	dir := Prefix + "leases/"
	objs, err := store.List(ctx, dir, "")
	if err != nil {
		return nil, fmt.Errorf("list leases in %s: %w", store, err)
	}
	var out []Lease
	for _, o := range objs {
		kind, _, ok := Parse(o.Key)
		if !ok || kind != KindLease {
			continue
		}
		var l Lease
		if found, err := readKey(ctx, store, o.Key, &l); err != nil {
			return nil, err
		} else if found {
			out = append(out, l)
		}
	}
	return out, nil
}

// InFlightSince returns the earliest time from which unreferenced files of
// topic may belong to a live lease (its Since less LeaseClockSlack);
// ok=false when no live lease covers the topic.
func InFlightSince(leases []Lease, topic string, now time.Time) (since time.Time, ok bool) {
	for _, l := range leases {
		if !l.Expires.After(now) || (len(l.Topics) > 0 && !slices.Contains(l.Topics, topic)) {
			continue
		}
		if s := l.Since.Add(-LeaseClockSlack); !ok || s.Before(since) {
			since, ok = s, true
		}
	}
	return since, ok
}

// LeaseHolder keeps a lease renewed in the background until Release.
type LeaseHolder struct {
	stop chan struct{}
	done chan struct{}
}

// leaseTerm is how long a lease lasts after each renewal; renewals come
// every third of it.
const leaseTerm = 3 * time.Minute

// HoldLease writes holder's lease for topics now, then renews it every
// minute with since() as its Since (the oldest file the holder still has
// in flight; time.Now() when none), until Release. The first write's error
// is returned (nothing may be uploaded without it); a failed renewal is
// logged and retried at the next one.
func HoldLease(ctx context.Context, store storage.Store, holder string, topics []string, since func() time.Time, log *slog.Logger) (*LeaseHolder, error) {
	write := func(ctx context.Context) error {
		now := time.Now()
		return WriteLease(ctx, store, Lease{Holder: holder, Topics: topics, Since: since().UTC(), Expires: now.Add(leaseTerm).UTC()})
	}
	if err := write(ctx); err != nil {
		return nil, err
	}
	h := &LeaseHolder{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(leaseTerm / 3)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				rctx, cancel := context.WithTimeout(ctx, leaseTerm/3)
				if err := write(rctx); err != nil {
					log.Warn("could not renew the lease that protects uncommitted files from VACUUM; retrying in a minute", "holder", holder, "err", err)
				}
				cancel()
			}
		}
	}()
	return h, nil
}

// Release stops renewing and deletes the lease (best effort: an expired
// lease protects nothing).
func (h *LeaseHolder) Release(ctx context.Context, store storage.Store, holder string) {
	if h == nil {
		return
	}
	close(h.stop)
	<-h.done
	_ = DeleteLease(ctx, store, holder)
}
