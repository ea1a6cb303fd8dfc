package relay

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/usererr"
)

// topicView is what a session knows of one topic's table: the sink's view
// when the session first met the topic, and the seam of its last rebuild.
type topicView struct {
	sink.Topic
	// through is the last commit LSN of the session's timeline the topic
	// holds: its position, mapped by the source's epochs
	// (catalog.Positions.Through). A transaction committed at or below it
	// is skipped.
	through int64
	seam    *catalog.Seam
	// lastTx is the commit LSN of the last event of the topic put in a
	// batch: a contract hold cannot start inside that transaction.
	lastTx pglogrepl.LSN
	// rate counts the topic's rows for its circuit breaker (breaker.go);
	// nil when the breaker is off.
	rate *rateWindow
	// staleHold: the store records a contract hold of this topic that no
	// pending hold explains (the relay restarted since): the first event
	// that passes its contract clears it.
	staleHold bool
	// unmarkedType was classified at unmarkedGen of a registry that marks
	// nothing (pii.Protector.Unmarked): its events skip the Protector
	// while that generation lasts.
	unmarkedType string
	unmarkedGen  uint64
	unmarkedSet  bool
}

// unmarked reports whether events of typ may skip the Protector p.
func (t *topicView) unmarked(p *pii.Protector, typ string) bool {
	if !t.unmarkedSet || typ != t.unmarkedType {
		return false
	}
	gen, ok := p.Unmarked()
	return ok && gen == t.unmarkedGen
}

// noteUnmarked records that p passed an event of typ, classified at gen of
// a registry that marked nothing then, when it still marks nothing at gen.
func (t *topicView) noteUnmarked(p *pii.Protector, typ string, gen uint64) {
	if now, ok := p.Unmarked(); !ok || now != gen {
		return
	}
	if typ != t.unmarkedType {
		t.unmarkedType = strings.Clone(typ) // typ may alias the receive buffer
	}
	t.unmarkedGen, t.unmarkedSet = gen, true
}

// topics opens topic tables lazily, once per session, and gives each
// group table met its group's commit interval (pacer).
type topics struct {
	r      *Relay
	pace   *pacer
	m      map[string]*topicView
	groups map[string]bool // group tables whose definition was read
}

func newTopics(r *Relay, p *pacer) *topics {
	return &topics{r: r, pace: p, m: map[string]*topicView{}, groups: map[string]bool{}}
}

// get returns the topic's view, opening its table on first use.
func (ts *topics) get(ctx context.Context, name string) (*topicView, error) {
	if v := ts.m[name]; v != nil {
		return v, nil
	}
	t, err := ts.r.sink.Open(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("open topic %q: %w", name, err)
	}
	if t.Table == "" {
		t.Table = name
	}
	if err := ts.readGroup(ctx, t.Table); err != nil {
		return nil, err
	}
	v := &topicView{Topic: t, through: ts.r.positions.Through(t.Position), rate: ts.r.breaker.rate(name)}
	if err := ts.r.checkPosition(name, v); err != nil {
		return nil, err
	}
	if t.Position >= 0 {
		rec, ok, err := catalog.ReadRebuildRecord(ctx, ts.r.store, ts.r.id.AppID, name)
		if err != nil {
			return nil, err
		}
		if ok {
			if v.seam, err = rec.Seam(t.Position, ts.r.positions); err != nil {
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

// readGroup reads, once per session, the definition of the group whose
// table is table (if it is one) and paces the table by its interval.
func (ts *topics) readGroup(ctx context.Context, table string) error {
	g, ok := catalog.GroupOfTable(table)
	if !ok || ts.groups[table] {
		return nil
	}
	def, found, err := catalog.ReadGroup(ctx, ts.r.store, g)
	if err != nil {
		return fmt.Errorf("read topic group %q: %w", g, err)
	}
	if d, ok := def.Interval(); found && ok {
		ts.pace.setInterval(table, d)
	}
	ts.groups[table] = true
	return nil
}

// forget drops a topic's view: the next get reads its table again.
func (ts *topics) forget(name string) { delete(ts.m, name) }

// checkPosition refuses a topic holding a position past the source's WAL
// end: the source's LSNs went back below what the relay published without
// a timeline to say where (a database restored in place, or replaced by
// another with the same system identifier). Streaming on would skip its
// new transactions as held; a recovery re-reads the outbox and begins a
// new epoch above every position.
func (r *Relay) checkPosition(name string, v *topicView) error {
	if r.walEnd == 0 || v.through <= int64(r.walEnd) {
		return nil
	}
	return usererr.New(nil, "topic %q holds events of %s up to LSN %s, past the source's WAL end %s: the database was restored or replaced without a new timeline, and its new transactions would be skipped as already relayed; run `relay bootstrap --recover`",
		name, r.id.Source, pglogrepl.LSN(v.through), r.walEnd)
}
