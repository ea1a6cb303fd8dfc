package bootstrap

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/storage"
)

// Identify connects to the source and returns cfg with AppID set to the
// source's appId in store (catalog.ResolveAppID; an AppID already set is
// the operator's explicit choice and is checked against its marker), and
// the source's identity. Every command that acts for a relay (bootstrap,
// recover, rebuild, status, reconcile) calls it first, so it acts on this
// source's progress and never on another's that shares the store, and
// refuses, before it writes anything, a server too old for the relay
// (migrations.CheckServerVersion).
func Identify(ctx context.Context, cfg Config, store storage.Store) (Config, catalog.Identity, error) {
	cfg = cfg.withDefaults()
	sql, err := pgsource.Connect(ctx, cfg.Source)
	if err != nil {
		return cfg, catalog.Identity{}, err
	}
	defer sql.Close(context.WithoutCancel(ctx))
	cfg, id, _, err := identifyOn(ctx, sql, cfg, store)
	return cfg, id, err
}

// identifyOn identifies the source on sql: its identity in the store, and
// what the server says of itself (its timeline, its WAL end).
func identifyOn(ctx context.Context, sql *pgx.Conn, cfg Config, store storage.Store) (Config, catalog.Identity, pgsource.Identity, error) {
	if err := migrations.CheckServerVersion(ctx, sql); err != nil {
		return cfg, catalog.Identity{}, pgsource.Identity{}, err
	}
	src, err := pgsource.Identify(ctx, sql, cfg.Slot)
	if err != nil {
		return cfg, catalog.Identity{}, src, err
	}
	id, err := catalog.ResolveAppID(ctx, store, src.Source, cfg.AppID)
	if err != nil {
		return cfg, id, src, err
	}
	cfg.AppID = id.AppID
	return cfg, id, src, nil
}
