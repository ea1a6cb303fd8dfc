package pgsource

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
)

// Identify returns the identity of the source a relay on slot reads through
// conn: the cluster's system identifier, the connection's database and the
// slot. pg_control_system() is executable by any role.
func Identify(ctx context.Context, conn *pgx.Conn, slot string) (catalog.Source, error) {
	src := catalog.Source{Slot: slot}
	err := conn.QueryRow(ctx, "SELECT system_identifier::text, current_database() FROM pg_control_system()").
		Scan(&src.SystemID, &src.Database)
	if err != nil {
		return src, fmt.Errorf("identify the source database: %w", err)
	}
	return src, nil
}
