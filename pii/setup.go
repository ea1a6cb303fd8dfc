package pii

import (
	"context"
	"log/slog"
	"time"

	"github.com/deltabus/deltabus/pii/classify"
	"github.com/deltabus/deltabus/pii/keys"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// Config is where a relay's, a consumer's or `relay erase`'s personal
// data settings come from (DELTABUS_PII_SCHEMAS, DELTABUS_KEK,
// DELTABUS_KEYS).
type Config struct {
	SchemasDir string // contracts as files (classify.ReadDir); "" = none
	KEK        string // file:///path or aws-kms://arn:...
	KeysDSN    string // the key table's database; "" = the source
	Source     string // the source DSN, the default of KeysDSN
	Keys       keys.Options
}

func (c Config) keysDSN() string {
	if c.KeysDSN != "" {
		return c.KeysDSN
	}
	return c.Source
}

// Setup is what Open returns: the classifier and, when personal data is
// marked, the key table.
type Setup struct {
	Classifier classify.Classifier
	Keys       *keys.Store // nil when nothing is marked
	Protector  *Protector  // nil when nothing is marked
}

// Close closes the key table.
func (s *Setup) Close() {
	if s != nil && s.Keys != nil {
		s.Keys.Close()
	}
}

// OpenProtector reads the schemas and, when they mark personal data,
// opens the KEK and the key table (creating its root on first use). It
// returns nil when no schema directory is configured. Every error is one
// line naming the fix: events are never written in clear because a key
// is unavailable.
func OpenProtector(ctx context.Context, c Config) (*Setup, error) {
	if c.SchemasDir == "" {
		return nil, nil
	}
	cls, err := classify.ReadDir(c.SchemasDir)
	if err != nil {
		return nil, usererr.New(err, "DELTABUS_PII_SCHEMAS: %v", err)
	}
	s := &Setup{Classifier: cls}
	if !cls.Any() {
		s.Protector, _ = NewProtector(cls, nil)
		return s, nil
	}
	if c.KEK == "" {
		return nil, usererr.New(nil, "the schemas in %s mark personal data but DELTABUS_KEK is not set, and events with personal data are never written in clear: "+
			"set DELTABUS_KEK=file:///path/kek.json (`relay keys init --kek-file /path/kek.json` writes one) or DELTABUS_KEK=aws-kms://arn:...", c.SchemasDir)
	}
	if s.Keys, err = openKeys(ctx, c, false); err != nil {
		return nil, err
	}
	s.Protector, _ = NewProtector(cls, s.Keys)
	return s, nil
}

// OpenKeys opens the KEK and the key table (read-only for consumers).
func OpenKeys(ctx context.Context, c Config, readOnly bool) (*keys.Store, error) {
	return openKeys(ctx, c, readOnly)
}

func openKeys(ctx context.Context, c Config, readOnly bool) (*keys.Store, error) {
	kek, err := keys.OpenKEK(ctx, c.KEK)
	if err != nil {
		return nil, err
	}
	dsn := c.keysDSN()
	if dsn == "" {
		return nil, usererr.New(nil, "no key table database: set DELTABUS_KEYS (or DELTABUS_SOURCE, its default) to a PostgreSQL DSN")
	}
	opts := c.Keys
	opts.ReadOnly = readOnly
	return keys.Open(ctx, dsn, kek, opts)
}

// WatchErasures follows the store's _erasures table in the background
// until ctx ends, dropping erased subjects' keys from ks's cache.
func WatchErasures(ctx context.Context, root storage.Store, ks *keys.Store, every time.Duration, log *slog.Logger) {
	if ks == nil {
		return
	}
	w := NewErasureWatcher(root, ks, log)
	go w.Run(ctx, every)
}
