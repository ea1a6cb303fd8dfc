package catalog

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// Resolved is a source's resolved position: every event of that source
// whose commit LSN is below LSN is in its topic, and every source
// transaction below it that published events has its transaction record
// (package txlog). It is the relay's acknowledged position, capped by its
// holds, as `relay status` shows it, and it never moves back.
//
// A reader of several topics that keeps, of each, the rows of this source
// whose position is below Position reads a cut consistent across the
// topics: for every source transaction it has all of its events or none.
// A row's position is its commit_lsn mapped by the source's epochs
// (Positions; the commit_lsn itself unless the source forked), and the
// rows a fork names as phantoms belong to no cut (package subscribe,
// ReadCut).
type Resolved struct {
	Source string `json:"source"` // the relay's appId, the source column of its rows
	// LSN is the end of the last source transaction whose events are all
	// durable, on the source's current timeline; Position is its position
	// (Positions.Pos), which never moves back, even across a failover
	// whose new timeline's LSNs restart below it. A record written before
	// positions had no Position: ReadResolved sets it to LSN.
	LSN      int64 `json:"lsn"`
	Position int64 `json:"position"`
	// CommitTime is the commit time of the last transaction the relay
	// committed events of, at or before LSN (zero when unknown).
	CommitTime time.Time `json:"commitTime,omitzero"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

// ReadResolved returns a source's resolved position, ok=false when it has
// none yet.
func ReadResolved(ctx context.Context, store storage.Store, appID string) (Resolved, bool, error) {
	var r Resolved
	ok, err := readJSON(ctx, store, &r, KindResolved, appID)
	if err != nil {
		return r, false, fmt.Errorf("read the resolved position of %s: %w", appID, err)
	}
	if r.Position == 0 {
		r.Position = r.LSN
	}
	return r, ok, nil
}

// WriteResolved replaces a source's resolved position with r unless the
// one in the store is already at or past it: the position never moves
// back, even when two instances of a relay (a zombie and its standby)
// both write. It reports whether r was written.
func WriteResolved(ctx context.Context, store storage.Store, r Resolved) (bool, error) {
	if r.Position == 0 {
		r.Position = r.LSN
	}
	cur, ok, err := ReadResolved(ctx, store, r.Source)
	if err != nil {
		return false, err
	}
	if ok && cur.Position >= r.Position {
		return false, nil
	}
	if err := writeJSON(ctx, store, r, KindResolved, r.Source); err != nil {
		return false, fmt.Errorf("write the resolved position of %s: %w", r.Source, err)
	}
	return true, nil
}

// ListResolved returns every source's resolved position, by source.
func ListResolved(ctx context.Context, store storage.Store) ([]Resolved, error) {
	objs, err := store.List(ctx, Prefix+"resolved/", "")
	if err != nil {
		return nil, fmt.Errorf("list resolved positions in %s: %w", store, err)
	}
	var out []Resolved
	for _, o := range objs {
		kind, names, ok := Parse(o.Key)
		if !ok || kind != KindResolved {
			continue
		}
		r, found, err := ReadResolved(ctx, store, names[0])
		if err != nil {
			return nil, err
		}
		if found {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Source < out[j].Source })
	return out, nil
}
