package keys

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/usererr"
)

// CheckKEK proves the KEK can both wrap and unwrap (a KMS key exists and
// its credentials may kms:Encrypt and kms:Decrypt), as the relay needs at
// its first start to create the root and at every start to open it. It
// writes nothing anywhere.
func CheckKEK(kek *KEK) error {
	probe := []byte("deltabus doctor probe")
	ad := []byte("deltabus-keys-v1 doctor")
	ct, err := kek.Encrypt(probe, ad)
	if err != nil {
		return usererr.New(err, "DELTABUS_KEK (%s) cannot encrypt (%s): check that the key exists and its credentials may kms:Encrypt", kek.ID, cause(err))
	}
	if _, err := kek.Decrypt(ct, ad); err != nil {
		return usererr.New(err, "DELTABUS_KEK (%s) cannot decrypt what it encrypted (%s): give its credentials kms:Decrypt", kek.ID, cause(err))
	}
	return nil
}

// Check is what `relay doctor` says of the key table at dsn for a relay
// connecting as dsn's role: the tables exist, the role may do what the
// relay does (SELECT and INSERT on the keys, SELECT on the erasures), and kek opens the root (or the
// root is still to be created, which the relay does at its first
// personal event). It reads only: no root or data key is created. The
// error is one line naming the fix.
func Check(ctx context.Context, dsn string, kek *KEK) (string, error) {
	s, err := connect(ctx, dsn, kek, Options{MaxConns: 1, CacheSize: 1, ReadOnly: true})
	if err != nil {
		return "", err
	}
	defer s.Close()
	for _, table := range []string{"deltabus.key_root", "deltabus.subject_keys"} {
		var sel, ins bool
		err := s.pool.QueryRow(ctx, "SELECT has_table_privilege($1, 'SELECT'), has_table_privilege($1, 'INSERT')", table).Scan(&sel, &ins)
		if err != nil {
			return "", s.tableError("check privileges on", table, err)
		}
		if !sel || !ins {
			return "", usererr.New(nil, "the key table %s in %s: the relay's role may not %s it: grant it SELECT, INSERT as deploy/sql/roles.sql does",
				table, s.where, map[bool]string{true: "INSERT into", false: "SELECT from"}[sel])
		}
	}
	var erased bool
	if err := s.pool.QueryRow(ctx, "SELECT has_table_privilege('deltabus.erased_subjects', 'SELECT')").Scan(&erased); err != nil {
		return "", s.tableError("check privileges on", "deltabus.erased_subjects", err)
	}
	if !erased {
		return "", usererr.New(nil, "the erasure table deltabus.erased_subjects in %s: the relay's role may not SELECT from it: grant it SELECT as deploy/sql/roles.sql does", s.where)
	}
	kekID, _, _, err := s.readRoot(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Sprintf("deltabus.key_root and deltabus.subject_keys in %s, SELECT and INSERT granted; no root key yet: the relay creates it under %s at its first personal event", s.where, kek.ID), nil
	}
	if err != nil {
		return "", err
	}
	if err := s.openRoot(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("deltabus.key_root and deltabus.subject_keys in %s, SELECT and INSERT granted; the root key (wrapped by %s) opens with DELTABUS_KEK", s.where, kekID), nil
}
