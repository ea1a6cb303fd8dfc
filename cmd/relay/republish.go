package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/storage"
)

// republishEnv is what the commands that publish events outside the
// stream (deadletter redrive, reconcile --repair) judge them with, as the
// relay does: the store's contract registry and the personal-data keys.
type republishEnv struct {
	store     storage.Store
	log       *slog.Logger
	mappings  outbox.Mappings
	contracts *contract.Cache
	protector *pii.Protector
	priv      *pii.Setup
}

func (e *republishEnv) close() { e.priv.Close() }

// openRepublish opens the store, the registry and the Protector the flags
// name; on failure it has printed the error.
// No source database is needed, unless personal data's keys live there.
func openRepublish(ctx context.Context, env *cliEnv, sf *sourceFlags) (*republishEnv, int, bool) {
	log, err := newLogger(env.stderr, sf.logFormat, sf.logLevel)
	if err != nil {
		return nil, fail(env, exitUsage, err), false
	}
	ms, err := outbox.ParseMappings(sf.mapping, nil)
	if err != nil {
		return nil, fail(env, exitUsage, fmt.Errorf("--mapping: %w", err)), false
	}
	store, code, ok := openStoreFlag(ctx, env, sf.store)
	if !ok {
		return nil, code, false
	}
	return withRegistry(ctx, env, sf, store, log, ms)
}

// withRegistry adds the registry and the Protector to an open store.
func withRegistry(ctx context.Context, env *cliEnv, sf *sourceFlags, store storage.Store, log *slog.Logger, ms outbox.Mappings) (*republishEnv, int, bool) {
	e := &republishEnv{store: store, log: log, mappings: ms, contracts: contract.New(store, contract.Options{Poll: -1})}
	if err := e.contracts.Load(ctx); err != nil {
		return nil, fail(env, exitFailure, err), false
	}
	priv, err := sf.pii.protector(ctx, store)
	if err != nil {
		return nil, fail(env, exitUsage, err), false
	}
	e.priv = priv
	if priv != nil {
		e.protector = priv.Protector
	}
	return e, exitOK, true
}
