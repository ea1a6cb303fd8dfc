package pii

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/deltabus/deltabus/pii/classify"
	"github.com/deltabus/deltabus/pii/keys"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// Config is where a relay's, a consumer's or `relay erase`'s personal
// data settings come from: the contract registry (Registry), or
// DELTABUS_PII_SCHEMAS instead of it, DELTABUS_KEK and DELTABUS_KEYS.
type Config struct {
	SchemasDir string // contracts as files (classify.ReadDir), used instead of Registry; "" = none
	KEK        string // file:///path or aws-kms://arn:...
	KeysDSN    string // the key table's database; "" = the source
	Source     string // the source DSN, the default of KeysDSN
	Keys       keys.Options
	// Registry is the store's contract registry (contract.Cache); nil
	// when the command has no store.
	Registry Registry
	// StartReadLimit bounds OpenProtector's read of the registry when no
	// KEK is set (0 = DefaultStartReadLimit).
	StartReadLimit time.Duration
}

// DefaultStartReadLimit is how long OpenProtector reads the registry to
// refuse a start without a KEK early. The read is only for that early,
// clearer error: past the limit the live Classify decides, as for a
// registry that cannot be read. Without it a store that accepts connections
// and never answers would hold the start for its stall timeout times its
// retries (minutes), before the relay serves /healthz or names a
// configuration error of its own.
const DefaultStartReadLimit = 10 * time.Second

// Registry is the contract registry as personal data reads it
// (contract.Cache): each event's classification live, as the registry
// grows, and everything registered now.
type Registry interface {
	classify.Classifier
	Classifications(ctx context.Context) (*classify.Static, error)
}

func (c Config) keysDSN() string {
	if c.KeysDSN != "" {
		return c.KeysDSN
	}
	return c.Source
}

// Classifications returns what marks personal data now: the schema
// directory when one is given, else the registry's contracts (nil when
// there is neither). Every error is one line naming the fix.
func (c Config) Classifications(ctx context.Context) (*classify.Static, error) {
	switch {
	case c.SchemasDir != "":
		cls, err := classify.ReadDir(c.SchemasDir)
		if err != nil {
			return nil, usererr.New(err, "DELTABUS_PII_SCHEMAS: %v", err)
		}
		return cls, nil
	case c.Registry != nil:
		cls, err := c.Registry.Classifications(ctx)
		if err != nil {
			return nil, usererr.New(err, "read the personal-data marks of the contract registry: %v", err)
		}
		return cls, nil
	}
	return nil, nil
}

// Classifier returns what marks personal data for a reader: the schema
// directory when one is given, else the contract registry, read live (a
// version registered later is classified when its first event comes).
// It returns nil when there is neither.
func (c Config) Classifier(ctx context.Context) (classify.Classifier, error) {
	switch {
	case c.SchemasDir != "":
		return c.Classifications(ctx)
	case c.Registry != nil:
		return c.Registry, nil
	}
	return nil, nil
}

// OpenRevealer opens the KEK and the key table read-only, and returns the
// Revealer over them and c's classifier (Classifier): a consumer's
// decryption. Close its Keys when done.
func OpenRevealer(ctx context.Context, c Config) (*Revealer, error) {
	cls, err := c.Classifier(ctx)
	if err != nil {
		return nil, err
	}
	if cls == nil {
		return nil, usererr.New(nil, "no contracts to say which fields are personal: give the store (DELTABUS_STORE), whose contract registry marks them, or DELTABUS_PII_SCHEMAS")
	}
	ks, err := openKeys(ctx, c, true)
	if err != nil {
		return nil, err
	}
	return NewRevealer(ks, cls), nil
}

// Setup is what Open returns: the classifier and, when personal data is
// marked, the key table.
type Setup struct {
	Classifier classify.Classifier
	Keys       *keys.Store // nil when no KEK is configured
	Protector  *Protector
	// Unread is why the registry could not be read at start to refuse a
	// start without a KEK early (nil: it was read, or not needed): the
	// events are classified as they come, and those a contract marks wait
	// for a KEK (ErrNoKEK).
	Unread error
}

// Close closes the key table.
func (s *Setup) Close() {
	if s != nil && s.Keys != nil {
		s.Keys.Close()
	}
}

// OpenProtector returns the Protector of c: over the schema directory when
// one is given, else over the contract registry, whose contracts it follows
// as they are registered. It opens the KEK and the key table when a KEK is
// configured, and refuses to start without one when a contract already
// marks personal data; a contract registered later without a KEK makes its
// events wait (ErrNoKEK). It returns nil when there is neither a schema
// directory nor a registry. Every error is one line naming the fix: events
// are never written in clear because a key is unavailable.
//
// A registry that cannot be read now (a store that is down at start, a
// contract that does not compile, a store that does not answer within
// StartReadLimit) does not stop it: the relay meets the
// same error per event, in its session, where it waits and retries (a
// standby rides it out); only a positive finding refuses the start.
func OpenProtector(ctx context.Context, c Config) (*Setup, error) {
	var s *Setup
	switch {
	case c.SchemasDir != "":
		cls, err := c.Classifications(ctx)
		if err != nil {
			return nil, err
		}
		s = &Setup{Classifier: cls}
		if !cls.Any() {
			s.Protector, _ = NewProtector(cls, nil) // nothing marked: no key table needed
			return s, nil
		}
		if c.KEK == "" {
			return nil, noKEKAtStart("the schemas in "+c.SchemasDir, cls)
		}
	case c.Registry != nil:
		s = &Setup{Classifier: c.Registry}
		if c.KEK == "" {
			// Read only to refuse early: unreadable, or not read within
			// the limit, the live Classify decides.
			cls, err := c.startClassifications(ctx)
			if err == nil && cls.Any() {
				return nil, noKEKAtStart("the contract registry", cls)
			}
			s.Unread = err
			s.Protector, _ = NewProtector(s.Classifier, nil)
			return s, nil
		}
	default:
		return nil, nil
	}
	ks, err := openKeys(ctx, c, false)
	if err != nil {
		return nil, err
	}
	s.Keys = ks
	s.Protector, _ = NewProtector(s.Classifier, ks)
	return s, nil
}

// startClassifications reads the registry's classifications within
// StartReadLimit.
func (c Config) startClassifications(ctx context.Context) (*classify.Static, error) {
	limit := c.StartReadLimit
	if limit <= 0 {
		limit = DefaultStartReadLimit
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	return c.Registry.Classifications(ctx)
}

// noKEKAtStart refuses a start without a KEK when where's contracts (cls)
// already mark personal data.
func noKEKAtStart(where string, cls *classify.Static) error {
	return usererr.New(nil, "%s mark personal data (%s) but DELTABUS_KEK is not set, and events with personal data are never written in clear: "+
		"set DELTABUS_KEK=file:///path/kek.json (`relay keys init --kek-file /path/kek.json` writes one) or DELTABUS_KEK=aws-kms://arn:...", where, firstMarked(cls))
}

// firstMarked names the first contract (or topic) of cls that marks
// personal data, for messages.
func firstMarked(cls *classify.Static) string {
	for _, k := range cls.Contracts() {
		if k.HasPersonal() {
			return fmt.Sprintf("topic %s type %s version %d", k.Topic, k.Type, k.Version)
		}
	}
	for _, t := range cls.KeyTopics() {
		return fmt.Sprintf("topic %s pseudonymises its keys", t)
	}
	return "none"
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
