package doctor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/storage"
)

// openStore opens the store, or records why not.
func openStore(ctx context.Context, o Options, r *Report) storage.Store {
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	st, err := daemon.OpenStore(cctx, o.Store, o.S3)
	if err != nil {
		r.fail("store", err)
		return nil
	}
	r.ok("store", "%s", st)
	return st
}

// checkStore: the relay can write the store (the preflight's probe), and
// the store refuses a second put-if-absent of one key, on which the
// exactly-once argument rests (two writers of one Delta version).
func checkStore(ctx context.Context, o Options, st storage.Store, r *Report) {
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	err := catalog.CheckWritable(cctx, st, "doctor")
	if errors.Is(err, catalog.ErrNoConditionalWrites) {
		err = nil // the conditional_write check reports it, with its fix
	}
	if err != nil {
		r.add("store_writable", Fail, "store %s is not writable: %s; check DELTABUS_STORE, its permissions (the relay's user must own a local store's folder) and credentials", st, pgsource.RootCause(err))
		r.skip("conditional_write", "not checked: the store is not writable (see store_writable)")
		return
	}
	r.ok("store_writable", "wrote and deleted a probe in %s", st)
	if err := conditionalWrite(cctx, st); err != nil {
		r.add("conditional_write", Fail, "%s", err)
		return
	}
	r.ok("conditional_write", "a second put-if-absent of one key was refused, as every Delta commit needs")
}

// conditionalWrite writes a probe key twice with PutIfAbsent, different
// bytes each time: the second must fail with storage.ErrExists and leave
// the first bytes.
func conditionalWrite(ctx context.Context, st storage.Store) error {
	var id [8]byte
	_, _ = rand.Read(id[:])
	key, err := catalog.Key(catalog.KindProbe, "doctor-"+hex.EncodeToString(id[:]))
	if err != nil {
		return err
	}
	defer func() { _ = st.Delete(context.WithoutCancel(ctx), key) }()
	first, second := []byte("deltabus doctor: first\n"), []byte("deltabus doctor: second\n")
	if err := st.PutIfAbsent(ctx, key, first); err != nil {
		return fmt.Errorf("put-if-absent of a new key failed in %s: %s", st, pgsource.RootCause(err))
	}
	err = st.PutIfAbsent(ctx, key, second)
	switch {
	case errors.Is(err, storage.ErrExists):
	case err == nil:
		return fmt.Errorf("store %s accepted a second put-if-absent of one key: it ignores conditional writes (If-None-Match: *), so two writers could both commit one Delta version; use a store that supports them (AWS S3, versitygw, or another S3-compatible server that does)", st)
	default:
		return fmt.Errorf("a second put-if-absent of one key in %s failed with %s, not with the conflict it must report; check the server's support for conditional writes (If-None-Match: *)", st, pgsource.RootCause(err))
	}
	got, err := st.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("read the probe back from %s: %s", st, pgsource.RootCause(err))
	}
	if !bytes.Equal(got, first) {
		return fmt.Errorf("store %s refused the second put-if-absent but replaced the object anyway: conditional writes are broken there", st)
	}
	return nil
}
