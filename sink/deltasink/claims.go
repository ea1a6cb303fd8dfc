package deltasink

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
)

// Claims (catalog.Claim) are the sink's proof of which table holds its
// source's progress of each topic, kept beside the tables:
//
//   - Open reads the table's claim: a table that no longer holds the
//     source's claimed position of the topic (replaced by a new table, or
//     restored to an older copy of itself) is Missing, as a deleted table
//     is, until the source's own events are restored into it (its rebuild
//     commits a position past the claim) or the operator restarts the
//     topic from its hold (an abort, whose first commit is past it too).
//   - A commit that puts the source's first position of a topic into a
//     table (or into a new table) writes the claim before it returns, so
//     before the relay acknowledges it: a table replaced later never
//     passes for one the source never wrote.
//   - Later commits refresh the claim at most once per claimEvery, in the
//     background, and Close writes what is left: so a table restored
//     while the relay is stopped is found out at the next start, unless
//     the copy is newer than the last claim written (the relay was
//     killed, and the copy was taken within its last claimEvery of
//     commits). A relay that finds a table gone, or
//     gone back, while it runs writes the claim at once.
//
// The dead-letter table has no claim: a lost one is created again, as
// before.
type claims struct {
	root  storage.Store
	appID string
	log   *slog.Logger

	mu     sync.Mutex
	tables map[string]*claimed
	bg     sync.WaitGroup
}

// claimed is one table's claim, in memory and as last read or written.
type claimed struct {
	// wmu serialises the claim's writes, each of the claim as it was when
	// it took wmu, so the store always ends with the latest; mu guards
	// the fields, and is never held across a write, so commits of the
	// table do not wait for one.
	wmu     sync.Mutex
	mu      sync.Mutex
	c       catalog.Claim
	stored  catalog.Claim // what the store holds, as far as the sink knows
	read    time.Time     // when it was last read from the store
	written time.Time     // when it was last written
	busy    bool          // a background write is under way
}

const (
	// claimEvery spaces the background refreshes of a table's claim: a
	// busy table adds one PUT a minute (a group's, one for all its
	// topics), one that commits less often one per commit at most.
	claimEvery = time.Minute
	// claimReread is how old a claim read from the store Open trusts.
	claimReread = 5 * time.Second
	// flushParallelism is how many claims Close writes at once: a stop
	// of a relay that wrote thousands of tables must not take a PUT's
	// time per table.
	flushParallelism = 16
)

func newClaims(root storage.Store, appID string, log *slog.Logger) *claims {
	return &claims{root: root, appID: appID, log: log, tables: map[string]*claimed{}}
}

// claimable reports whether the sink keeps a claim on the table: not on
// the dead-letter table, and not for a republish counter
// (catalog.RepublishAppID), which records no source's progress.
func (cs *claims) claimable(table string) bool {
	return table != outbox.DeadLetterTopic && !catalog.IsRepublishTxn(cs.appID)
}

func (cs *claims) of(table string) *claimed {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.tables[table]
	if c == nil {
		c = &claimed{c: catalog.Claim{Table: table, AppID: cs.appID, Topics: map[string]catalog.Progress{}}}
		cs.tables[table] = c
	}
	return c
}

// load reads the table's claim from the store when the sink's reading is
// older than maxAge (0: when it never read it), keeping what the sink
// noted since; c.mu held.
func (cs *claims) load(ctx context.Context, c *claimed, maxAge time.Duration) error {
	if !c.read.IsZero() && (maxAge == 0 || time.Since(c.read) < maxAge) {
		return nil
	}
	got, _, err := catalog.ReadClaim(ctx, cs.root, cs.appID, c.c.Table)
	if err != nil {
		return err
	}
	mine := c.c
	c.stored = cloneClaim(got)
	for topic, p := range mine.Topics {
		got.Note(topic, p.TableID, p.Txn, p.Version)
	}
	c.c, c.read = got, time.Now()
	return nil
}

// check is Open's judgement of a table found with id at version, holding
// the source's txn of topic (-1: none): why the table no longer holds the
// source's claimed progress, or "". A table that holds it is noted.
func (cs *claims) check(ctx context.Context, table, topic, id string, version, txn int64) (string, error) {
	if !cs.claimable(table) {
		return "", nil
	}
	c := cs.of(table)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := cs.load(ctx, c, claimReread); err != nil {
		return "", fmt.Errorf("read this source's claim on table %s: %w", table, err)
	}
	if why := c.c.Lost(topic, id, txn); why != "" {
		return why, nil
	}
	c.c.Note(topic, id, txn, version)
	return "", nil
}

// wentBack records the positions a handle had seen the table with id
// hold at version, once the table was found gone (delta.ErrTableGone) or
// gone back to an older copy (delta.ErrRolledBack): written at once, so
// that Open, in this process or the next, finds the loss even when the
// copy is put back where the table was.
func (cs *claims) wentBack(ctx context.Context, table, id string, version int64, positions map[string]int64) error {
	return cs.committed(ctx, table, id, version, positions, true)
}

// committed notes that the table with id, at version, now holds the
// source's positions of the topics. A topic the stored claim does not
// bind to this table (or sync) has the claim written before committed
// returns; otherwise the claim is refreshed in the background when due.
func (cs *claims) committed(ctx context.Context, table, id string, version int64, positions map[string]int64, sync bool) error {
	if !cs.claimable(table) {
		return nil
	}
	c := cs.of(table)
	c.mu.Lock()
	if err := cs.load(ctx, c, 0); err != nil {
		c.mu.Unlock()
		return fmt.Errorf("read this source's claim on table %s: %w", table, err)
	}
	bind := sync
	for topic, pos := range positions {
		c.c.Note(topic, id, pos, version)
		bind = bind || !c.stored.Binds(topic, id)
	}
	due := !bind && !c.busy && time.Since(c.written) >= claimEvery
	c.busy = c.busy || due
	c.mu.Unlock()
	if bind {
		return cs.write(ctx, c)
	}
	if due {
		cs.bg.Add(1)
		go func() {
			defer cs.bg.Done()
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := cs.write(wctx, c); err != nil {
				cs.log.Warn("could not refresh this source's claim on a table (retried at a later commit)", "table", table, "err", err)
			}
			c.mu.Lock()
			c.busy = false
			c.mu.Unlock()
		}()
	}
	return nil
}

// write stores the claim as it is now, unless the store holds it already.
func (cs *claims) write(ctx context.Context, c *claimed) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if sameClaim(c.c, c.stored) {
		c.written = time.Now()
		c.mu.Unlock()
		return nil
	}
	snap := cloneClaim(c.c)
	c.mu.Unlock()
	if err := catalog.WriteClaim(ctx, cs.root, snap); err != nil {
		return fmt.Errorf("write this source's claim on table %s: %w", snap.Table, err)
	}
	c.mu.Lock()
	c.stored, c.written = snap, time.Now()
	c.mu.Unlock()
	return nil
}

// flush writes every claim the sink holds ahead of the store, and waits
// for the background writes, or for ctx.
func (cs *claims) flush(ctx context.Context) {
	cs.mu.Lock()
	all := make([]*claimed, 0, len(cs.tables))
	for _, c := range cs.tables {
		all = append(all, c)
	}
	cs.mu.Unlock()
	var g errgroup.Group
	g.SetLimit(flushParallelism)
	for _, c := range all {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := cs.write(ctx, c); err != nil {
				cs.log.Warn("could not write this source's claim on a table", "err", err)
			}
			return nil
		})
	}
	_ = g.Wait()
	done := make(chan struct{})
	go func() { cs.bg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func cloneClaim(c catalog.Claim) catalog.Claim {
	c.Topics = maps.Clone(c.Topics)
	return c
}

func sameClaim(a, b catalog.Claim) bool { return maps.Equal(a.Topics, b.Topics) }
