package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/relay"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

// sourceFlags are the flags every command that talks to PostgreSQL and the
// store shares. Values from the environment are applied after parsing, so
// --help and a mistyped flag never print them (a DSN may hold a password).
type sourceFlags struct {
	source, store, slot, publication, mapping string
	appID                                     string
	logFormat, logLevel                       string
	pii                                       piiFlags
	env                                       *cliEnv
}

func (f *sourceFlags) register(fs *flag.FlagSet, env *cliEnv) {
	f.env = env
	fs.StringVar(&f.source, "source", "", "PostgreSQL DSN, e.g. postgres://relay@db:5432/app (default from DELTABUS_SOURCE); put the password in PGPASSWORD or ~/.pgpass (PGPASSFILE), not in the DSN")
	fs.StringVar(&f.store, "store", "", "store URL: file:///path or s3://bucket/prefix (default from DELTABUS_STORE)")
	fs.StringVar(&f.slot, "slot", envOr(env, "DELTABUS_SLOT", "deltabus"), "replication slot (env DELTABUS_SLOT)")
	fs.StringVar(&f.appID, "app-id", envOr(env, "DELTABUS_APP_ID", ""),
		"Delta txn appId this relay's progress is kept under (env DELTABUS_APP_ID); default: the source's, deltabus-<system identifier>-<slot>. Set it only to claim progress the relay cannot prove is this source's")
	fs.StringVar(&f.publication, "publication", envOr(env, "DELTABUS_PUBLICATION", "deltabus"), "publication (env DELTABUS_PUBLICATION)")
	fs.StringVar(&f.mapping, "mapping", envOr(env, "DELTABUS_MAPPING", "deltabus"),
		"outbox column mapping: a preset (deltabus, debezium) or field=column pairs, e.g. topic=aggregatetype,key=aggregateid")
	fs.StringVar(&f.logFormat, "log-format", envOr(env, "DELTABUS_LOG_FORMAT", "text"), "log format: text or json")
	fs.StringVar(&f.logLevel, "log-level", envOr(env, "DELTABUS_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	f.pii.register(fs, env)
}

// resolve fills what the command line left empty from the environment;
// pass it to parseFlags.
func (f *sourceFlags) resolve() {
	if f.source == "" {
		f.source = f.env.getenv("DELTABUS_SOURCE")
	}
	if f.store == "" {
		f.store = f.env.getenv("DELTABUS_STORE")
	}
	f.pii.source = f.source
}

func envOr(env *cliEnv, key, def string) string {
	if v := env.getenv(key); v != "" {
		return v
	}
	return def
}

// requireSource fails with one line when no DSN was given.
func (f *sourceFlags) requireSource() error {
	if f.source == "" {
		return usererr.New(nil, "no source database: set DELTABUS_SOURCE or --source to a PostgreSQL DSN (postgres://user@host:5432/db)")
	}
	return nil
}

// config is the relay configuration the flags name.
func (f *sourceFlags) config() relay.Config {
	return relay.Config{Source: f.source, Store: f.store, Slot: f.slot, Publication: f.publication, AppID: f.appID}.WithDefaults()
}

// sourceEnv is what the commands that copy from the source need.
type sourceEnv struct {
	cfg      relay.Config
	log      *slog.Logger
	mappings outbox.Mappings
	store    storage.Store
}

// open validates the flags and opens the store; on failure it has printed
// the error and returns the exit code.
func (f *sourceFlags) open(ctx context.Context, env *cliEnv) (sourceEnv, int, bool) {
	var se sourceEnv
	se.cfg = f.config()
	var err error
	if se.log, err = newLogger(env.stderr, f.logFormat, f.logLevel); err != nil {
		return se, fail(env, exitUsage, err), false
	}
	if err := se.cfg.Validate(); err != nil {
		return se, fail(env, exitUsage, err), false
	}
	if se.mappings, err = outbox.ParseMappings(f.mapping, nil); err != nil {
		return se, fail(env, exitUsage, fmt.Errorf("--mapping: %w", err)), false
	}
	if se.store, err = daemon.OpenStore(ctx, se.cfg.Store, storage.S3Options{Logger: se.log}); err != nil {
		return se, fail(env, exitUsage, err), false
	}
	return se, exitOK, true
}
