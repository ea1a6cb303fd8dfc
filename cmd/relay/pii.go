package main

import (
	"context"
	"flag"

	"github.com/deltabus/deltabus/pii"
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
