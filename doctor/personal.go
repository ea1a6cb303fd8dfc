package doctor

import (
	"context"
	"fmt"

	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/pii/keys"
	"github.com/deltabus/deltabus/storage"
)

// checkPersonal checks what `relay run` needs for personal data: the
// contracts that mark it (the store's registry, or --pii-schemas) can be
// read, and when they mark personal data or a KEK is configured, the KEK
// wraps and unwraps and the key table is there, the relay's role may read
// and insert keys, and the KEK opens its root. Nothing is reported when no
// contract marks personal data and no KEK or schema directory is set.
func checkPersonal(ctx context.Context, o Options, store storage.Store, r *Report) {
	c := o.PII
	from := "the contract registry"
	if c.SchemasDir != "" {
		from = c.SchemasDir
	} else if store != nil {
		c.Registry = contract.New(store, contract.Options{Poll: -1})
	}
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	cls, err := c.Classifications(cctx)
	cancel()
	switch {
	case err != nil:
		r.add("pii_schemas", Fail, "%v", err)
		r.skip("kek", "not checked: the contracts could not be read (see the pii_schemas check)")
		r.skip("key_table", "not checked: the contracts could not be read (see the pii_schemas check)")
		return
	case cls == nil || !cls.Any() && c.KEK == "":
		if c.SchemasDir != "" {
			r.ok("pii_schemas", "%s: no schema marks personal data, so no KEK or key table is needed", from)
		}
		return
	}
	contracts, topics := cls.Contracts(), map[string]bool{}
	n := 0
	for _, k := range contracts {
		if k.HasPersonal() {
			topics[k.Topic], n = true, n+1
		}
	}
	r.ok("pii_schemas", "%s: %d contract version(s) in %d topic(s) mark personal data", from, n, len(topics))

	kek, err := openKEK(ctx, o, c.KEK)
	if err != nil {
		r.fail("kek", err)
		r.skip("key_table", "not checked: no KEK to open its root with (see the kek check)")
		return
	}
	r.ok("kek", "%s wraps and unwraps", kek.ID)
	dsn := c.KeysDSN
	if dsn == "" {
		dsn = o.Source
	}
	kctx, kcancel := context.WithTimeout(ctx, o.Timeout)
	defer kcancel()
	detail, err := keys.Check(kctx, dsn, kek)
	if err != nil {
		r.fail("key_table", err)
		return
	}
	r.ok("key_table", "%s", detail)
}

func openKEK(ctx context.Context, o Options, uri string) (*keys.KEK, error) {
	if uri == "" {
		return nil, fmt.Errorf("the contracts mark personal data but DELTABUS_KEK is not set, and the relay never writes it in clear: " +
			"set DELTABUS_KEK=file:///path/kek.json (`relay keys init --kek-file /path/kek.json` writes one) or DELTABUS_KEK=aws-kms://arn:...")
	}
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	kek, err := keys.OpenKEK(cctx, uri)
	if err != nil {
		return nil, err
	}
	if err := keys.CheckKEK(kek); err != nil {
		return nil, err
	}
	return kek, nil
}
