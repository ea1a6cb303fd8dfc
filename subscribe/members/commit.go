package members

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/deltabus/deltabus/storage"
)

type intentKind int

const (
	kReceive intentKind = iota
	kAck
	kNack
	kReset  // a new epoch at reset.Low
	kCreate // the group's first entry, unless another server wrote it
)

// intent is one request's change, turned into operations of an entry by
// the committer against the state the entry follows.
type intent struct {
	kind  intentKind
	req   *ReceiveRequest
	can   func(*record) bool
	ids   []string
	acks  []ackID
	retry time.Duration
	reset *resetOp
	done  chan outcome
}

type outcome struct {
	msgs []Message
	res  AckResult
	err  error
}

func (it *intent) finish(o outcome) {
	select {
	case it.done <- o:
	default:
	}
}

// planned is what an entry does for one intent.
type planned struct {
	it   *intent
	recs []*record
	ds   []int32
	res  AckResult
}

var errContention = errors.New("the group's log is contended by other servers beyond reason: try again")

// commitPending writes the pending intents as entries until none is left.
func (g *Group) commitPending(ctx context.Context) {
	for {
		g.mu.Lock()
		batch := g.pending
		g.pending = nil
		g.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		g.commitBatch(ctx, batch)
	}
}

// commitBatch plans an entry for the intents against the state, puts it
// at the next sequence number and applies it; a lost race reads the
// winner's entries and plans again, so every entry is valid against the
// state it follows.
func (g *Group) commitBatch(ctx context.Context, batch []*intent) {
	for attempt := 0; len(batch) > 0; attempt++ {
		if attempt >= 100 {
			failAll(batch, errContention)
			return
		}
		if time.Since(g.confirmed) > confirmFor {
			if err := g.sync(ctx); err != nil {
				failAll(batch, &storeError{err})
				return
			}
		}
		now := g.now()
		g.mu.Lock()
		e, plans, rest, taken := g.planLocked(batch, now)
		g.mu.Unlock()
		if e.empty() {
			for _, p := range plans {
				p.it.finish(outcome{res: p.res})
			}
			batch = rest
			continue
		}
		data, err := marshalEntry(e)
		if err != nil {
			panic(err) // an entry always encodes
		}
		start := time.Now()
		seq := g.st.Seq + 1
		err = g.log.put(ctx, seq, data)
		g.mu.Lock()
		switch {
		case err == nil:
			g.applyLocked(ctx, seq, e)
			g.confirmed = start
			outs := g.outcomesLocked(plans)
			g.mu.Unlock()
			for i, p := range plans {
				p.it.finish(outs[i])
			}
			batch = rest
		case errors.Is(err, storage.ErrExists):
			g.ix.putBack(taken, g.st, now)
			g.mu.Unlock()
			if err := g.sync(ctx); err != nil {
				failAll(batch, &storeError{err})
				return
			}
		default:
			g.ix.putBack(taken, g.st, now)
			g.confirmed = time.Time{} // the entry may have landed: read before writing again
			g.mu.Unlock()
			failAll(batch, &storeError{err})
			return
		}
	}
}

func marshalEntry(e *entry) ([]byte, error) { return json.Marshal(e) }

func failAll(batch []*intent, err error) {
	for _, it := range batch {
		it.finish(outcome{err: err})
	}
}

// planLocked turns intents into one entry against the current state. A
// reset (or the group's creation) is an entry of its own: the intents
// after it wait for the next entry (rest). taken are the records popped
// from the index, to give back if the entry does not land.
func (g *Group) planLocked(batch []*intent, now time.Time) (e *entry, plans []*planned, rest []*intent, taken []*record) {
	e = &entry{Server: g.o.Server, At: ms(now)}
	st := g.st
	for i, it := range batch {
		if it.kind == kCreate || it.kind == kReset {
			if i > 0 {
				return g.finishPlan(e, plans, batch[i:], taken, now)
			}
			r := *it.reset
			switch {
			case it.kind == kCreate && st.Epoch > 0: // another server created it
			default:
				r.Epoch = st.Epoch + 1
				e.Reset = &r
			}
			plans = append(plans, &planned{it: it})
			return e, plans, batch[1:], nil
		}
	}
	touched := map[Position]bool{}
	var receives []*planned
	for _, it := range batch {
		p := &planned{it: it}
		plans = append(plans, p)
		switch it.kind {
		case kReceive:
			receives = append(receives, p)
		case kAck, kNack:
			g.planAcks(e, p, touched, now)
		}
	}
	taken = g.planReceives(e, receives, now)
	return g.finishPlan(e, plans, nil, taken, now)
}

// finishPlan adds the Low the index reached, when it moved.
func (g *Group) finishPlan(e *entry, plans []*planned, rest []*intent, taken []*record, now time.Time) (*entry, []*planned, []*intent, []*record) {
	if low := g.ix.trim(); less(g.st.Low, low) && g.st.Epoch > 0 {
		e.Low = &low
	}
	return e, plans, rest, taken
}

// planAcks validates an intent's ack ids against the state.
func (g *Group) planAcks(e *entry, p *planned, touched map[Position]bool, now time.Time) {
	st := g.st
	for i, a := range p.it.acks {
		fail := func(reason string) { p.res.Failed = append(p.res.Failed, Failed{AckID: p.it.ids[i], Reason: reason}) }
		f := st.flight[a.pos]
		switch {
		case a.epoch != st.Epoch:
			fail("the group was reset since this event was handed out")
		case p.it.kind == kAck && st.isAcked(a.pos):
			p.res.Done++ // acknowledged already (a retried request)
		case f == nil:
			fail("this event was not handed out, or was acknowledged already")
		case f.Delivery != a.d:
			fail("the lease ran out and the event was handed out again")
		case touched[a.pos]:
			p.res.Done++
		case p.it.kind == kAck:
			touched[a.pos] = true
			e.Ack = append(e.Ack, posOp{a.pos.Version, a.pos.Offset})
			p.res.Done++
		default:
			touched[a.pos] = true
			e.Nack = append(e.Nack, nackOp{posOp: posOp{a.pos.Version, a.pos.Offset}, NotBefore: ms(now.Add(p.it.retry))})
			p.res.Done++
		}
	}
}

// planReceives hands the ready events out, one at a time to each receive
// in turn, oldest first; duplicates by event_id are skipped instead.
func (g *Group) planReceives(e *entry, receives []*planned, now time.Time) (taken []*record) {
	if g.st.Epoch == 0 {
		return nil
	}
	var refused []*record
	for progress := true; progress; {
		progress = false
		for _, p := range receives {
			if len(p.recs) >= p.it.req.Max {
				continue
			}
			got, no := g.ix.take(1, g.st, now, p.it.can)
			refused = append(refused, no...)
			for _, r := range got {
				taken = append(taken, r)
				progress = true
				if r.dup {
					e.Skip = append(e.Skip, posOp{r.pos.Version, r.pos.Offset})
					continue
				}
				d := int32(1)
				if f := g.st.flight[r.pos]; f != nil {
					d = f.Delivery + 1
				}
				e.Lease = append(e.Lease, leaseOp{posOp: posOp{r.pos.Version, r.pos.Offset}, D: d, M: p.it.req.Member,
					Until: ms(now.Add(p.it.req.Visibility))})
				p.recs, p.ds = append(p.recs, r), append(p.ds, d)
			}
		}
	}
	g.ix.putBack(refused, g.st, now)
	return taken
}

// outcomesLocked builds each intent's answer once its entry landed.
func (g *Group) outcomesLocked(plans []*planned) []outcome {
	outs := make([]outcome, len(plans))
	for i, p := range plans {
		outs[i].res = p.res
		for k, r := range p.recs {
			if r.ev == nil {
				continue // acknowledged meanwhile: cannot be, by the key rule
			}
			outs[i].msgs = append(outs[i].msgs, Message{AckID: ackID{epoch: g.st.Epoch, pos: r.pos, d: p.ds[k]}.String(),
				Delivery: p.ds[k], Event: *r.ev})
		}
	}
	return outs
}

// commitLow writes an entry that only moves Low, when it lags what the
// index knows and nothing else was written for a second: restarts and
// retention then see the group where it is.
func (g *Group) commitLow(ctx context.Context) {
	g.mu.Lock()
	low := g.ix.trim()
	due := g.st.Epoch > 0 && less(g.st.Low, low) && g.now().Sub(g.entryAt) > time.Second && len(g.pending) == 0
	g.mu.Unlock()
	if due {
		g.commitBatch(ctx, []*intent{{kind: kAck, done: make(chan outcome, 1)}})
	}
}

// snapshot writes the state every SnapshotEvery entries, or after 30 s
// with changes, in the background, then cleans the log up.
func (g *Group) snapshot(ctx context.Context) {
	g.mu.Lock()
	due := !g.snapping && g.st.Seq > g.snapSeq &&
		(g.st.Seq-g.snapSeq >= int64(g.o.SnapshotEvery) || g.now().Sub(g.snapAt) > 30*time.Second)
	if !due {
		g.mu.Unlock()
		return
	}
	seq := g.st.Seq
	g.snapping = true
	g.mu.Unlock()
	st := g.status()
	view := &View{At: g.now().UTC(), Members: st.Members, Waiting: st.Waiting, AckRate: st.AckRate, Oldest: st.Oldest, Buffered: st.Buffered}
	g.mu.Lock()
	data, err := g.st.marshal(g.name, g.topic, view)
	g.mu.Unlock()
	if err != nil {
		panic(err) // a state always encodes
	}
	go func() {
		err := g.log.writeSnapshot(ctx, seq, data)
		var n int
		if err == nil {
			n, err = g.log.clean(ctx)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		g.snapping = false
		if err != nil {
			if ctx.Err() == nil {
				g.logger.Warn("members: writing a snapshot or cleaning the log failed; trying again later", "err", err)
			}
			return
		}
		g.snapSeq, g.snapAt = seq, g.now()
		g.logger.Debug("members: snapshot written", "seq", seq, "entries_deleted", n)
	}()
}
