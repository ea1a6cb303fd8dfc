package main

import (
	"context"
	"flag"

	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/pii/classify"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/topicmeta"
	"github.com/deltabus/deltabus/usererr"
)

// piiFlags name the personal-data settings: the KEK, the key table's
// database, and --pii-schemas, schemas used instead of the store's
// contract registry (whose x-deltabus-pii marks are what normally says
// which fields are personal).
type piiFlags struct {
	schemas, kek, keys string
	source             string // the source DSN (resolve sets it): the key table's default database
}

func (f *piiFlags) register(fs *flag.FlagSet, env *cliEnv) {
	fs.StringVar(&f.schemas, "pii-schemas", env.getenv("DELTABUS_PII_SCHEMAS"),
		"directory of event schemas laid out as DIR/<topic>/<type>/<version>.json whose x-deltabus-pii fields are encrypted, used instead of the store's contract registry (env DELTABUS_PII_SCHEMAS; for tests and single-service setups: register contracts instead, see docs/personal-data.md)")
	fs.StringVar(&f.kek, "kek", env.getenv("DELTABUS_KEK"), "key-encryption key: file:///path/kek.json or aws-kms://arn:... (env DELTABUS_KEK)")
	fs.StringVar(&f.keys, "keys", env.getenv("DELTABUS_KEYS"), "PostgreSQL DSN of the key table, when not the source database (env DELTABUS_KEYS)")
}

func (f *piiFlags) config() pii.Config {
	return pii.Config{SchemasDir: f.schemas, KEK: f.kek, KeysDSN: f.keys, Source: f.source}
}

// configFor is config with the contract registry of store.
func (f *piiFlags) configFor(store storage.Store) pii.Config {
	c := f.config()
	if store != nil {
		c.Registry = registryOf(store)
	}
	return c
}

// registryOf is the contract registry of a store as a command reads it:
// on demand, no background polling.
func registryOf(store storage.Store) pii.Registry {
	return contract.New(store, contract.Options{Poll: -1})
}

// protector opens the Protector over store's contract registry (or the
// --pii-schemas directory); close it when done.
func (f *piiFlags) protector(ctx context.Context, store storage.Store) (*pii.Setup, error) {
	return pii.OpenProtector(ctx, f.configFor(store))
}

// personalColumns is the topicmeta.Provider of personal columns for every
// command that describes topics (relay topics, relay topics describe,
// relay catalog sync, relay run's governance and page): the registry's of
// the store each describes, or what its --pii-schemas names.
var personalColumns = &pii.Columns{Registry: registryOf}

func init() { topicmeta.Register(personalColumns) }

// describePersonal reads the schemas of dir into the topics' personal
// columns ("": the store's contract registry's).
func describePersonal(dir string) error {
	if dir == "" {
		personalColumns.Set(nil)
		return nil
	}
	s, err := classify.ReadDir(dir)
	if err != nil {
		return usererr.New(err, "--pii-schemas: %v", err)
	}
	personalColumns.Set(s)
	return nil
}

// piiSchemasFlag is --pii-schemas for commands that only describe topics.
func piiSchemasFlag(fs *flag.FlagSet, env *cliEnv) *string {
	return fs.String("pii-schemas", env.getenv("DELTABUS_PII_SCHEMAS"),
		"directory of event schemas (DIR/<topic>/<type>/<version>.json) whose personal fields are listed as each topic's personal columns (env DELTABUS_PII_SCHEMAS)")
}
