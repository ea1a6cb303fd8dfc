package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/pii/keys"
)

// cmdKeys: `relay keys init --kek-file F` writes a new KEK.
func cmdKeys(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] != "init" {
		fmt.Fprintln(env.stderr, "relay keys: usage: relay keys init --kek-file /path/kek.json")
		return exitUsage
	}
	fs := newFlagSet(env, "keys init", "--kek-file /path/kek.json")
	file := fs.String("kek-file", "", "where to write the new KEK (a Tink AES-256-GCM keyset, mode 0600); never overwritten")
	if code, ok := parseFlags(fs, args[1:]); !ok {
		return code
	}
	if *file == "" {
		return fail(env, exitUsage, errors.New("--kek-file is required, e.g. relay keys init --kek-file /etc/deltabus/kek.json"))
	}
	id, err := keys.WriteKEKFile(*file)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	fmt.Fprintf(env.stdout, "wrote KEK %s (%s) to %s, mode 0600: keep it safe and backed up (losing it loses every key it wraps)\n", id, "AES-256-GCM", *file)
	fmt.Fprintf(env.stdout, "next: DELTABUS_KEK=file://%s\n", *file)
	return exitOK
}

// cmdErase: `relay erase --subject ID [--topic T]`.
func cmdErase(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "erase", "--subject ID [--topic T] [flags]")
	var sf sourceFlags
	sf.register(fs, env)
	subject := fs.String("subject", "", "the data subject's id, as the payloads hold it at their x-deltabus-subject pointer")
	topicName := fs.String("topic", "", "erase the subject's key of this topic only (default: every topic)")
	table := fs.String("table", outbox.DefaultTable, "the outbox table whose rows of the subject are deleted")
	wait := fs.Duration("wait", time.Minute, "wait up to this long for the relay to acknowledge everything written before the erasure, so the counts include its events in flight (0: do not wait; the erasure is safe either way)")
	if code, ok := parseFlags(fs, args, sf.resolve); !ok {
		return code
	}
	if *subject == "" {
		return fail(env, exitUsage, errors.New("--subject is required, e.g. relay erase --subject customer-42"))
	}
	if *topicName != "" {
		if err := outbox.ValidTopic(*topicName); err != nil {
			return fail(env, exitUsage, fmt.Errorf("--topic: %w", err))
		}
	}
	se, code, ok := sf.open(ctx, env)
	if !ok {
		return code
	}
	cfg := sf.pii.configFor(se.store)
	schemas, err := cfg.Classifications(ctx) // the subject pointers of the outbox rows
	if err != nil {
		return fail(env, exitUsage, err)
	}
	ks, err := pii.OpenKeys(ctx, cfg, false)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	defer ks.Close()
	m := se.mappings.For(splitTable(*table))
	rep, err := pii.Erase(ctx, pii.EraseRequest{Subject: *subject, Topic: *topicName, Source: se.cfg.Source, Slot: se.cfg.Slot,
		Outbox: *table, Mapping: m, Wait: *wait, Store: se.store, Keys: ks, Schemas: schemas,
		Progress: func(s string) { fmt.Fprintln(env.stderr, "relay erase: "+s) }})
	if err != nil {
		return fail(env, exitFailure, err)
	}
	for _, l := range rep.Summary() {
		fmt.Fprintln(env.stdout, l)
	}
	return exitOK
}

func splitTable(t string) (schema, table string) {
	if s, tb, ok := strings.Cut(t, "."); ok {
		return s, tb
	}
	return "public", t
}
