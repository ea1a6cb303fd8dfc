package bootstrap

import (
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/relay"
	"github.com/deltabus/deltabus/storage"
)

// FirstStart returns the relay's first-start hook (see relay.Relay.Bootstrap).
func FirstStart(log *slog.Logger) func(ctx context.Context, cfg relay.Config, store storage.Store) (pglogrepl.LSN, error) {
	return func(ctx context.Context, cfg relay.Config, store storage.Store) (pglogrepl.LSN, error) {
		return 0, errors.New("bootstrap: not implemented yet")
	}
}
