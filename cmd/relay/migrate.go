package main

import (
	"context"
	"fmt"
	"time"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/pii"
)

func cmdMigrate(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "migrate", "[flags]")
	var sf sourceFlags
	sf.register(fs, env)
	schema := fs.String("schema", "public", "schema of the outbox table")
	table := fs.String("table", "outbox", "outbox table name")
	keyTables := fs.Bool("key-tables", false, "also create the key tables of personal data (schema deltabus; in DELTABUS_KEYS's database when set); implied when DELTABUS_KEK or DELTABUS_KEYS is set")
	if code, ok := parseFlags(fs, args, sf.resolve); !ok {
		return code
	}
	if err := sf.requireSource(); err != nil {
		return fail(env, exitUsage, err)
	}
	mappings, err := outbox.ParseMappings(sf.mapping, nil)
	if err != nil {
		return fail(env, exitUsage, fmt.Errorf("--mapping: %w", err))
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgsource.Connect(cctx, sf.source)
	if err != nil {
		return fail(env, exitFailure, err)
	}
	defer conn.Close(ctx)
	rep, err := migrations.Apply(ctx, conn, migrations.Options{Schema: *schema, Table: *table, Publication: sf.publication, Mappings: mappings})
	if err != nil {
		return fail(env, exitFailure, err)
	}
	fmt.Fprint(env.stdout, rep.String())
	if *keyTables || sf.pii.kek != "" || sf.pii.keys != "" {
		krep, err := migrateKeys(ctx, sf.pii.config())
		if err != nil {
			return fail(env, exitFailure, err)
		}
		fmt.Fprint(env.stdout, krep.String())
		rep.Items = append(rep.Items, krep.Items...)
	}
	if err := pgsource.CheckWALLevel(ctx, conn); err != nil {
		fmt.Fprintf(env.stderr, "relay: warning: %v\n", err)
	}
	if !rep.Changed() {
		fmt.Fprintln(env.stdout, "nothing to do: the outbox is already set up")
	}
	return exitOK
}

// migrateKeys creates the key tables in the key table's database (the
// source unless DELTABUS_KEYS names another).
func migrateKeys(ctx context.Context, c pii.Config) (migrations.Report, error) {
	dsn := c.KeysDSN
	if dsn == "" {
		dsn = c.Source
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgsource.Connect(cctx, dsn)
	if err != nil {
		return migrations.Report{}, err
	}
	defer conn.Close(ctx)
	return migrations.ApplyKeys(ctx, conn)
}
