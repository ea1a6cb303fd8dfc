package doctor

import (
	"context"
	"fmt"

	"github.com/deltabus/deltabus/pii/classify"
	"github.com/deltabus/deltabus/pii/keys"
)

// checkPersonal checks what `relay run` needs for personal data when
// --pii-schemas is given: the schemas parse, and when they mark personal
// data, the KEK wraps and unwraps and the key table is there, the relay's
// role may read and insert keys, and the KEK opens its root. Nothing is
// checked, and nothing reported, when no schema directory is configured.
func checkPersonal(ctx context.Context, o Options, r *Report) {
	c := o.PII
	if c.SchemasDir == "" {
		return
	}
	cls, err := classify.ReadDir(c.SchemasDir)
	if err != nil {
		r.add("pii_schemas", Fail, "DELTABUS_PII_SCHEMAS: %v", err)
		r.skip("kek", "not checked: the schemas could not be read (see the pii_schemas check)")
		r.skip("key_table", "not checked: the schemas could not be read (see the pii_schemas check)")
		return
	}
	if !cls.Any() {
		r.ok("pii_schemas", "%s: no schema marks personal data, so no KEK or key table is needed", c.SchemasDir)
		return
	}
	contracts, topics := cls.Contracts(), map[string]bool{}
	for _, k := range contracts {
		topics[k.Topic] = true
	}
	r.ok("pii_schemas", "%s: %d contract version(s) in %d topic(s) mark personal data", c.SchemasDir, len(contracts), len(topics))

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
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	detail, err := keys.Check(cctx, dsn, kek)
	if err != nil {
		r.fail("key_table", err)
		return
	}
	r.ok("key_table", "%s", detail)
}

func openKEK(ctx context.Context, o Options, uri string) (*keys.KEK, error) {
	if uri == "" {
		return nil, fmt.Errorf("the schemas mark personal data but DELTABUS_KEK is not set, and the relay never writes it in clear: " +
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
