package subscribe

import (
	"context"
	"sync"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
)

// PhantomRefresh is how often a Phantoms watcher lists the store's fork
// records again: one List request.
const PhantomRefresh = time.Minute

// Phantoms marks the events a source published from a timeline it later
// abandoned at a failover (catalog.Fork): their state change was lost with
// the old primary, though the event stays in its topic. A subscription
// sets Event.Phantom on them; `relay consume` and the HTTP API print
// "phantom": true. The records are read at the first Poll and every
// PhantomRefresh after: a phantom delivered before its failover was
// recorded is delivered unmarked (relay reconcile names it). Safe for
// concurrent use.
type Phantoms struct {
	store storage.Store
	mu    sync.Mutex
	set   map[phantomKey]bool
	next  time.Time
}

type phantomKey struct{ source, id string }

// NewPhantoms returns a watcher of store's fork records.
func NewPhantoms(store storage.Store) *Phantoms { return &Phantoms{store: store} }

// Poll reads the fork records when PhantomRefresh has passed since it last
// did. A failure is returned and tried again at the next Poll.
func (p *Phantoms) Poll(ctx context.Context) error {
	p.mu.Lock()
	due := time.Now().After(p.next)
	p.mu.Unlock()
	if !due {
		return nil
	}
	forks, err := catalog.ListForks(ctx, p.store)
	if err != nil {
		return err
	}
	set := map[phantomKey]bool{}
	for _, f := range forks {
		for _, ph := range f.Phantoms {
			for _, id := range ph.IDs {
				set[phantomKey{f.AppID, id}] = true
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.set, p.next = set, time.Now().Add(PhantomRefresh)
	return nil
}

// Mark sets Event.Phantom on the events the fork records name. With none
// recorded (every store that never failed over) it costs a lock.
func (p *Phantoms) Mark(evs []Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.set) == 0 {
		return
	}
	for i := range evs {
		evs[i].Phantom = p.set[phantomKey{evs[i].Source, evs[i].ID}]
	}
}
