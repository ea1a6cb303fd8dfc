package main

import (
	"context"
	"fmt"

	"github.com/deltabus/deltabus/doctor"
	"github.com/deltabus/deltabus/outbox"
)

// cmdDoctor checks every precondition of `relay run` on the database and
// the store in one go (package doctor): exit 0 when all hold, 1 otherwise.
func cmdDoctor(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "doctor", "[flags]")
	var sf sourceFlags
	sf.register(fs, env)
	var o doctor.Options
	fs.DurationVar(&o.MaxClockSkew, "max-clock-skew", 0, "how far this host's clock may be from the database's (default 1s)")
	fs.DurationVar(&o.Timeout, "timeout", 0, "time limit of each check (default 15s)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if code, ok := parseFlags(fs, args, sf.resolve); !ok {
		return code
	}
	mappings, err := outbox.ParseMappings(sf.mapping, nil)
	if err != nil {
		return fail(env, exitUsage, fmt.Errorf("--mapping: %w", err))
	}
	o.Source, o.Store, o.Slot, o.Publication, o.AppID, o.Mappings = sf.source, sf.store, sf.slot, sf.publication, sf.appID, mappings
	o.PII = sf.pii.config()
	rep := doctor.Run(ctx, o)
	if *asJSON {
		_ = rep.PrintJSON(env.stdout)
	} else {
		rep.Print(env.stdout)
	}
	if !rep.OK {
		return exitFailure
	}
	return exitOK
}
