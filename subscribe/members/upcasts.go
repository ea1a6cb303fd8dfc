package members

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
)

// StoreUpcasts are declarative upcasters kept in the store, so that a
// member in any language can read an event type at the version it was
// written for ("want_version"): for (topic, type, version v) a JSON Patch
// (RFC 6902: add, remove, replace, move, copy, test) that turns a payload
// of version v into one of version v+1, e.g.
//
//	[{"op":"move","from":"/amount","path":"/total"},{"op":"add","path":"/currency","value":"EUR"}]
//
// kept at catalog.KindUpcast. Languages differ, a patch reads the same
// everywhere; Go consumers may still register functions
// (subscribe.Upcasters). Groups reads them again every ten seconds
// (Refresh); Step answers from what was read.
type StoreUpcasts struct {
	root  storage.Store
	mu    sync.RWMutex
	steps map[upcastKey]subscribe.Upcaster
}

type upcastKey struct {
	topic, typ string
	from       int32
}

// NewStoreUpcasts returns the upcasters of the store root (none until the
// first Refresh).
func NewStoreUpcasts(root storage.Store) *StoreUpcasts {
	return &StoreUpcasts{root: root, steps: map[upcastKey]subscribe.Upcaster{}}
}

var _ Upcasts = (*StoreUpcasts)(nil)

// Step implements Upcasts.
func (s *StoreUpcasts) Step(topic, typ string, from int32) (subscribe.Upcaster, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	f, ok := s.steps[upcastKey{topic, typ, from}]
	return f, ok
}

// maxPatchBytes bounds an upcaster.
const maxPatchBytes = 64 << 10

// Refresh reads the store's upcasters again.
func (s *StoreUpcasts) Refresh(ctx context.Context) error {
	objs, err := s.root.List(ctx, catalog.UpcastsPrefix, "")
	if err != nil {
		return fmt.Errorf("list upcasters in %s: %w", s.root, err)
	}
	steps := map[upcastKey]subscribe.Upcaster{}
	for _, o := range objs {
		kind, names, ok := catalog.Parse(o.Key)
		if !ok || kind != catalog.KindUpcast || o.Size > maxPatchBytes {
			continue
		}
		data, err := s.root.Get(ctx, o.Key)
		if err != nil {
			return fmt.Errorf("read upcaster %s: %w", o.Key, err)
		}
		f, err := patchUpcaster(data)
		if err != nil {
			return fmt.Errorf("upcaster %s in %s: %w", o.Key, s.root, err)
		}
		v, _ := strconv.ParseInt(names[2], 10, 32)
		steps[upcastKey{names[0], names[1], int32(v)}] = f
	}
	s.mu.Lock()
	s.steps = steps
	s.mu.Unlock()
	return nil
}

// patchUpcaster compiles a JSON Patch into an Upcaster.
func patchUpcaster(data []byte) (subscribe.Upcaster, error) {
	p, err := jsonpatch.DecodePatch(data)
	if err != nil {
		return nil, fmt.Errorf("not a JSON Patch (RFC 6902): %w", err)
	}
	return func(payload json.RawMessage) (json.RawMessage, error) {
		out, err := p.Apply(payload)
		if err != nil {
			return nil, fmt.Errorf("JSON Patch: %w", err)
		}
		return out, nil
	}, nil
}

// SetUpcast stores the JSON Patch that turns version from of typ in topic
// into from+1, replacing the one before.
func SetUpcast(ctx context.Context, root storage.Store, topic, typ string, from int32, patch []byte) error {
	if len(patch) > maxPatchBytes {
		return badRequest("the patch is %d bytes: at most %d", len(patch), maxPatchBytes)
	}
	if _, err := patchUpcaster(patch); err != nil {
		return badRequest("%v", err)
	}
	key, err := catalog.Key(catalog.KindUpcast, topic, typ, strconv.Itoa(int(from)))
	if err != nil {
		return badRequest("%v", err)
	}
	if err := root.Put(ctx, key, patch); err != nil {
		return fmt.Errorf("store upcaster of %s %s version %d: %w", topic, typ, from, err)
	}
	return nil
}
