package relay

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink"
)

// topicView is what a session knows of one topic's table: the sink's view
// when the session first met the topic, and the seam of its last rebuild.
type topicView struct {
	sink.Topic
	seam *catalog.Seam
	// lastTx is the commit LSN of the last event of the topic put in a
	// batch: a contract hold cannot start inside that transaction.
	lastTx pglogrepl.LSN
	// staleHold: the store records a contract hold of this topic that no
	// pending hold explains (the relay restarted since): the first event
	// that passes its contract clears it.
	staleHold bool
}

// topics opens topic tables lazily, once per session.
type topics struct {
	r *Relay
	m map[string]*topicView
}

func newTopics(r *Relay) *topics { return &topics{r: r, m: map[string]*topicView{}} }

// get returns the topic's view, opening its table on first use.
func (ts *topics) get(ctx context.Context, name string) (*topicView, error) {
	if v := ts.m[name]; v != nil {
		return v, nil
	}
	t, err := ts.r.sink.Open(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("open topic %q: %w", name, err)
	}
	v := &topicView{Topic: t}
	if t.Position >= 0 {
		rec, ok, err := catalog.ReadRebuildRecord(ctx, ts.r.store, ts.r.id.AppID, name)
		if err != nil {
			return nil, err
		}
		if ok {
			if v.seam, err = rec.Seam(t.Position); err != nil {
				return nil, err
			}
		}
	}
	if c := ts.r.Contracts; c != nil && ts.r.contractHolds[name] == nil {
		if err := c.Load(ctx); err != nil {
			return nil, err
		}
		if c.Policy(name).Holds() {
			st, _, err := catalog.ReadRebuildState(ctx, ts.r.store, ts.r.id.AppID, name)
			if err != nil {
				return nil, err
			}
			v.staleHold = st.Paused == catalog.HoldContract
		}
	}
	ts.m[name] = v
	return v, nil
}

// forget drops a topic's view: the next get reads its table again.
func (ts *topics) forget(name string) { delete(ts.m, name) }
