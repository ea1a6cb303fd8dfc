package bootstrap

import (
	"context"
	"fmt"
	"sync"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
)

// places says where each topic a snapshot meets lives (catalog.Placement):
// its own table, or its group's, under whose folder its files are written
// and whose txn appId/topic records its position. The groups are listed
// once, when the snapshot starts; commit checks each topic's placement
// again before its files are committed (checkPlaced).
type places struct {
	root   storage.Store
	groups []catalog.Group
	mu     sync.Mutex
	m      map[string]catalog.Placement
}

func newPlaces(ctx context.Context, root storage.Store) (*places, error) {
	gs, err := catalog.ListGroups(ctx, root)
	if err != nil {
		return nil, err
	}
	return &places{root: root, groups: gs, m: map[string]catalog.Placement{}}, nil
}

// of returns where the topic lives, reading its registry entry once.
func (p *places) of(ctx context.Context, name string) (catalog.Placement, error) {
	p.mu.Lock()
	pl, ok := p.m[name]
	p.mu.Unlock()
	if ok {
		return pl, nil
	}
	pl, err := catalog.ReadPlacement(ctx, p.root, name, p.groups)
	if err != nil {
		return pl, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[name] = pl
	return pl, nil
}

// known returns the placement of a topic of returned before (a topic it
// did not, an internal one among them, has its own table).
func (p *places) known(name string) catalog.Placement {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pl, ok := p.m[name]; ok {
		return pl
	}
	return catalog.Placement{Topic: name, Table: name}
}

// store returns the folder of the topic's table.
func (p *places) store(pl catalog.Placement) storage.Store { return storage.Sub(p.root, pl.Table) }

// checkPlaced fails when the topic would now be committed to another table
// than the one its files were written to: a group matching it was created
// (or another writer registered it elsewhere) while the snapshot copied.
// The bootstrap or rebuild is then run again, and places it anew.
func checkPlaced(ctx context.Context, root storage.Store, groups []catalog.Group, wrote catalog.Placement) error {
	now, err := catalog.ReadPlacement(ctx, root, wrote.Topic, groups)
	if err != nil {
		return err
	}
	if now.Table != wrote.Table {
		return fmt.Errorf("topic %q now belongs in table %s, but its files were written to %s (a topic group was created, or another relay registered the topic, meanwhile): run it again",
			wrote.Topic, now.Table, wrote.Table)
	}
	return nil
}
