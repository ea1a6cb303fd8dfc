package main

import (
	"context"
	"flag"

	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/pii/classify"
	"github.com/deltabus/deltabus/topicmeta"
	"github.com/deltabus/deltabus/usererr"
)

// piiFlags name the personal-data settings: the schemas that mark personal
// fields, the KEK and the key table's database.
type piiFlags struct {
	schemas, kek, keys string
	source             string // the source DSN (resolve sets it): the key table's default database
}

func (f *piiFlags) register(fs *flag.FlagSet, env *cliEnv) {
	fs.StringVar(&f.schemas, "pii-schemas", env.getenv("DELTABUS_PII_SCHEMAS"),
		"directory of event schemas laid out as DIR/<topic>/<type>/<version>.json whose x-deltabus-pii fields are encrypted (env DELTABUS_PII_SCHEMAS; see docs/personal-data.md)")
	fs.StringVar(&f.kek, "kek", env.getenv("DELTABUS_KEK"), "key-encryption key: file:///path/kek.json or aws-kms://arn:... (env DELTABUS_KEK)")
	fs.StringVar(&f.keys, "keys", env.getenv("DELTABUS_KEYS"), "PostgreSQL DSN of the key table, when not the source database (env DELTABUS_KEYS)")
}

func (f *piiFlags) config() pii.Config {
	return pii.Config{SchemasDir: f.schemas, KEK: f.kek, KeysDSN: f.keys, Source: f.source}
}

// protector opens the Protector the flags name (nil when no schemas are
// given); close it when done.
func (f *piiFlags) protector(ctx context.Context) (*pii.Setup, error) {
	return pii.OpenProtector(ctx, f.config())
}

// personalColumns is the topicmeta.Provider of personal columns for every
// command that describes topics (relay topics, relay topics describe,
// relay catalog sync, relay run's governance and page); each sets what
// its --pii-schemas names.
var personalColumns = &pii.Columns{}

func init() { topicmeta.Register(personalColumns) }

// describePersonal reads the schemas of dir ("" = none) into the topics'
// personal columns.
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
