package migrations

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// KeyTables are the tables of personal data's keys (package pii/keys).
const (
	KeySchema       = "deltabus"
	KeyRootTable    = "deltabus.key_root"
	SubjectKeyTable = "deltabus.subject_keys"
	ErasedTable     = "deltabus.erased_subjects"
)

// ApplyKeys creates the key tables of personal data (schema deltabus:
// key_root, subject_keys, erased_subjects) where missing (also the one an
// older release did not create), in one transaction under the
// migration lock, and revokes what default privileges gave roles that
// must not read keys. Idempotent; it reports what it did.
func ApplyKeys(ctx context.Context, conn *pgx.Conn) (Report, error) {
	var rep Report
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		var keys, erased bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL, to_regclass($3) IS NOT NULL",
			KeyRootTable, SubjectKeyTable, ErasedTable).Scan(&keys, &erased); err != nil {
			return fmt.Errorf("look up the key tables: %w", err)
		}
		if keys && erased {
			rep.add(false, "key tables %s, %s and %s already exist", KeyRootTable, SubjectKeyTable, ErasedTable)
			return nil
		}
		if err := exec(ctx, tx, "create_keys.sql", sqlNames{}); err != nil {
			return err
		}
		if keys {
			rep.add(true, "created the erasure table %s beside the key tables", ErasedTable)
		} else {
			rep.add(true, "created key tables %s, %s and %s", KeyRootTable, SubjectKeyTable, ErasedTable)
		}
		return nil
	})
	if err != nil {
		return Report{}, fmt.Errorf("migrate key tables: %w", err)
	}
	return rep, nil
}
