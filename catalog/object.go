package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/deltabus/deltabus/storage"
)

// readJSON reads the object at kind/names into v; ok=false when absent.
func readJSON(ctx context.Context, store storage.Store, v any, kind Kind, names ...string) (bool, error) {
	key, err := Key(kind, names...)
	if err != nil {
		return false, fmt.Errorf("catalog: %w", err)
	}
	return readKey(ctx, store, key, v)
}

func readKey(ctx context.Context, store storage.Store, key string, v any) (bool, error) {
	b, err := store.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", key, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s in %s is corrupt: %w", key, store, err)
	}
	return true, nil
}

// writeJSON replaces the object at kind/names with v.
func writeJSON(ctx context.Context, store storage.Store, v any, kind Kind, names ...string) error {
	key, err := Key(kind, names...)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := store.Put(ctx, key, append(b, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

func deleteObject(ctx context.Context, store storage.Store, kind Kind, names ...string) error {
	key, err := Key(kind, names...)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	if err := store.Delete(ctx, key); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}
