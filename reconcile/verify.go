package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
)

func us(t time.Time) int64 { return t.UnixMicro() }

// checkTopic verifies one topic over the closed windows.
// topicLogCounts returns the topic's log and its counts per window, from
// the prefetch when it covered these windows.
func (c *checker) topicLogCounts(ctx context.Context, topic string, bounds []time.Time) (*topicLog, []int64, [][]string, error) {
	if p := c.prefetch[topic]; p != nil && len(p.counts) == len(bounds)-1 || p != nil && p.err != nil {
		return p.tl, p.counts, p.unreadable, p.err
	}
	tl, err := c.loadLog(ctx, topic)
	if err != nil {
		return nil, nil, nil, err
	}
	bus := make([]int64, len(bounds))
	for i, b := range bounds {
		bus[i] = us(b)
	}
	counts, unreadable, err := tl.countWindows(ctx, bus)
	return tl, counts, unreadable, err
}

func (c *checker) checkTopic(ctx context.Context, topic string, closed []Window, bounds []time.Time, src []int64) ([]Result, error) {
	out := make([]Result, len(closed))
	for i, w := range closed {
		out[i] = Result{Topic: topic, Window: w, SourceCount: src[i]}
	}
	fail := func(err error) []Result {
		for i := range out {
			out[i].Status, out[i].Error = StatusError, err.Error()
		}
		return out
	}
	tl, counts, unreadable, err := c.topicLogCounts(ctx, topic, bounds)
	if err != nil {
		return fail(err), ctxErr(ctx)
	}
	if tl.shared {
		for i := range out {
			out[i].Table = tl.table.name
		}
	}
	for i := range out {
		if err := c.checkWindow(ctx, tl, &out[i], counts[i], unreadable[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkWindow sets the status of one window of a topic, in its span. An
// error ends the run (ctx ended, the source failed).
func (c *checker) checkWindow(ctx context.Context, tl *topicLog, res *Result, lc int64, unreadable []string) (err error) {
	ctx, span := c.startWindow(ctx, res)
	defer func() { endWindow(span, res, err) }()
	if len(unreadable) > 0 {
		res.Status, res.Unreadable = StatusUnreadable, unreadable
		return nil
	}
	res.LogCount = &lc
	if err := c.verify(ctx, tl, res); err != nil {
		if cerr := ctxErr(ctx); cerr != nil {
			return cerr
		}
		var ue *unreadableError
		if errors.As(err, &ue) {
			res.Status, res.Unreadable = StatusUnreadable, []string{ue.Error()}
			return nil
		}
		if isSourceErr(err) {
			return err
		}
		res.Status, res.Error = StatusError, err.Error()
	}
	return nil
}

func ctxErr(ctx context.Context) error { return ctx.Err() }

// sourceError marks a failed source query: the run cannot go on.
type sourceError struct{ error }

func (e sourceError) Unwrap() error { return e.error }

func isSourceErr(err error) bool {
	var se sourceError
	return errors.As(err, &se)
}

// verify sets the status of one window whose log count is known.
func (c *checker) verify(ctx context.Context, tl *topicLog, res *Result) error {
	d := &diffState{}
	switch {
	case c.opts.VerifyIDs:
		if err := c.diff(ctx, tl, res, res.Window, d); err != nil {
			return err
		}
	case res.SourceCount == *res.LogCount:
		res.Check, res.Status = CheckCounts, StatusClean
		return nil
	default:
		if err := c.narrow(ctx, tl, res, res.Window, res.SourceCount, *res.LogCount, d); err != nil {
			return err
		}
	}
	return c.finish(ctx, res, d)
}

// narrow bisects r on counts and diffs the ranges that differ once they are
// small enough.
func (c *checker) narrow(ctx context.Context, tl *topicLog, res *Result, r Window, src, lg int64, d *diffState) error {
	if src == lg {
		return nil
	}
	a, b := us(r.Start), us(r.End)
	if src+lg <= c.opts.LeafRows || b-a < 2 {
		return c.diff(ctx, tl, res, r, d)
	}
	mid := time.UnixMicro(a + (b-a)/2).UTC()
	left, right := Window{r.Start, mid}, Window{mid, r.End}
	ls, err := c.src.count(ctx, res.Topic, left)
	if err != nil {
		return sourceError{err}
	}
	ll, err := tl.count(ctx, a, us(mid))
	if err != nil {
		return err
	}
	if err := c.narrow(ctx, tl, res, left, ls, ll, d); err != nil {
		return err
	}
	return c.narrow(ctx, tl, res, right, src-ls, lg-ll, d)
}

// diffState collects the exact differences of one window.
type diffState struct {
	missing, unexpected []string
	unexpectedOcc       []int64
	dups                []Duplicate
	distinct            int64
	whole               bool
}

// diff compares the ids of r in the source and in the log.
func (c *checker) diff(ctx context.Context, tl *topicLog, res *Result, r Window, d *diffState) error {
	srcIDs, err := c.src.ids(ctx, res.Topic, r)
	if err != nil {
		return sourceError{err}
	}
	logIDs, err := tl.ids(ctx, us(r.Start), us(r.End))
	if err != nil {
		return err
	}
	if r == res.Window {
		d.whole = true
	} else {
		res.Narrowed = append(res.Narrowed, r)
	}
	i, j := 0, 0
	for i < len(srcIDs) || j < len(logIDs) {
		id := nextID(srcIDs, i, logIDs, j)
		sc := 0
		for ; i < len(srcIDs) && srcIDs[i] == id; i++ {
			sc++
		}
		k, occ := 0, int64(0)
		for ; j < len(logIDs) && logIDs[j].id == id; j++ {
			k, occ = k+1, logIDs[j].occ
		}
		switch {
		case k == 0:
			d.missing = append(d.missing, id)
		case sc == 0:
			d.unexpected = append(d.unexpected, id)
			d.unexpectedOcc = append(d.unexpectedOcc, occ)
		}
		if k > 0 {
			d.distinct++
		}
		if k > 1 {
			d.dups = append(d.dups, Duplicate{ID: id, Copies: k})
		}
	}
	return nil
}

func nextID(src []string, i int, lg []logID, j int) string {
	switch {
	case i >= len(src):
		return lg[j].id
	case j >= len(lg):
		return src[i]
	case src[i] < lg[j].id:
		return src[i]
	}
	return lg[j].id
}

// finish classifies the differences and sets the window's status.
func (c *checker) finish(ctx context.Context, res *Result, d *diffState) error {
	if d.whole {
		res.Check = CheckIDs
		res.DistinctCount = &d.distinct
	} else {
		res.Check = CheckNarrow
	}
	missing := d.missing
	if len(missing) > 0 {
		dead, err := c.deadLetters(ctx)
		if err != nil {
			return err
		}
		missing = missing[:0:0]
		for _, id := range d.missing {
			if dead[id] {
				res.DeadLettered = capAppend(res.DeadLettered, id, c.opts.MaxIDs)
			} else {
				missing = append(missing, id)
			}
		}
	}
	res.MissingCount = int64(len(missing))
	res.Missing = capList(missing, c.opts.MaxIDs)
	for i, id := range d.unexpected {
		if d.unexpectedOcc[i] < c.horizon {
			res.Cleaned++
			continue
		}
		res.UnexpectedCount++
		res.Unexpected = capAppend(res.Unexpected, id, c.opts.MaxIDs)
	}
	for _, dup := range d.dups {
		res.DuplicateCount += int64(dup.Copies - 1)
		if len(res.Duplicates) < c.opts.MaxIDs {
			res.Duplicates = append(res.Duplicates, dup)
		}
	}
	res.setStatus()
	return nil
}

func (res *Result) setStatus() {
	res.Status = StatusClean
	if res.MissingCount+res.UnexpectedCount+res.DuplicateCount > 0 {
		res.Status = StatusDiverged
	}
}

func capAppend(list []string, id string, n int) []string {
	if len(list) < n {
		return append(list, id)
	}
	return list
}

func capList(list []string, n int) []string {
	if len(list) > n {
		return list[:n:n]
	}
	return list
}

// deadLetters returns every event id of the dead-letter topic, read once.
func (c *checker) deadLetters(ctx context.Context) (map[string]bool, error) {
	if c.dead != nil {
		return c.dead, nil
	}
	c.dead = map[string]bool{}
	tl, err := c.loadLog(ctx, outbox.DeadLetterTopic)
	if err != nil {
		c.log.Warn("reconcile: dead-letter topic unreadable; missing ids are not checked against it", "err", err)
		return c.dead, nil
	}
	for _, f := range tl.files {
		cols, err := tl.read(ctx, f, true)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			c.log.Warn("reconcile: dead-letter file unreadable", "err", err)
			continue
		}
		for _, id := range cols.ids {
			c.dead[id] = true
		}
	}
	return c.dead, nil
}

// resolveLate moves unexpected ids that the source holds now (committed
// after the snapshot, later than the lateness allowance) to LateCommits.
func (c *checker) resolveLate(ctx context.Context, rep *Report) error {
	phantoms, err := c.forks(ctx, rep)
	if err != nil {
		return err
	}
	for i := range rep.Results {
		res := &rep.Results[i]
		if len(res.Unexpected) == 0 {
			continue
		}
		found, err := lookup(ctx, c.aux, c.src.tables, res.Unexpected)
		if err != nil {
			return err
		}
		kept := res.Unexpected[:0]
		for _, id := range res.Unexpected {
			if found[id] {
				res.LateCommits = append(res.LateCommits, id)
				res.UnexpectedCount--
			} else {
				kept = append(kept, id)
				if phantoms[id] {
					res.Phantoms = append(res.Phantoms, id)
				}
			}
		}
		res.Unexpected = kept
		if len(res.LateCommits) > 0 {
			c.log.Warn("reconcile: events committed later than the lateness allowance", "topic", res.Topic,
				"window", res.Window.String(), "count", len(res.LateCommits))
		}
		res.setStatus()
	}
	return nil
}

// forks lists the source's recorded forks in the report and returns the
// ids of their phantoms.
func (c *checker) forks(ctx context.Context, rep *Report) (map[string]bool, error) {
	all, err := catalog.ListForks(ctx, c.root)
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, f := range all {
		if !c.ours(f.AppID) {
			continue
		}
		rep.Forks = append(rep.Forks, ForkSummary{FromTimeline: f.FromTimeline, ToTimeline: f.ToTimeline, ForkLSN: f.ForkLSN,
			DetectedAt: f.DetectedAt, Phantoms: f.Count()})
		for _, p := range f.Phantoms {
			for _, id := range p.IDs {
				ids[id] = true
			}
		}
	}
	return ids, nil
}
