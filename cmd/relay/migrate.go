package main

import (
	"context"
	"fmt"
	"time"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pgsource"
)

func cmdMigrate(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "migrate", "[flags]")
	var sf sourceFlags
	sf.register(fs, env)
	schema := fs.String("schema", "public", "schema of the outbox table")
	table := fs.String("table", "outbox", "outbox table name")
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
	if err := pgsource.CheckWALLevel(ctx, conn); err != nil {
		fmt.Fprintf(env.stderr, "relay: warning: %v\n", err)
	}
	if !rep.Changed() {
		fmt.Fprintln(env.stdout, "nothing to do: the outbox is already set up")
	}
	return exitOK
}
