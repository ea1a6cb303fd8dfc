package envelope

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tink-crypto/tink-go/v2/aead"
	"github.com/tink-crypto/tink-go/v2/keyset"
	"github.com/tink-crypto/tink-go/v2/tink"
)

func newAEAD(t *testing.T) tink.AEAD {
	t.Helper()
	h, err := keyset.NewHandle(aead.AES256GCMNoPrefixKeyTemplate())
	if err != nil {
		t.Fatal(err)
	}
	a, err := aead.New(h)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestSealOpen(t *testing.T) {
	a := newAEAD(t)
	sub := Subject{1, 2, 3}
	ad := AssociatedData(nil, "customers", "0190f0f0-0000-7000-8000-000000000001", "/email")
	for _, v := range []string{`"ada@example.com"`, `42`, `{"street":"1 Main St"}`, `["x",null]`, `"\u00e9"`} {
		env, err := Seal(nil, a, sub, []byte(v), ad)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(env) || strings.Contains(string(env), "ada") || !Is(env) {
			t.Fatalf("envelope %s", env)
		}
		e, err := Parse(env)
		if err != nil {
			t.Fatal(err)
		}
		if e.Subject != sub {
			t.Fatalf("subject %v", e.Subject)
		}
		pt, err := e.Open(a, ad)
		if err != nil || string(pt) != v {
			t.Fatalf("open: %q %v", pt, err)
		}
		for _, other := range [][]byte{
			AssociatedData(nil, "customers", "0190f0f0-0000-7000-8000-000000000002", "/email"),
			AssociatedData(nil, "customers", "0190f0f0-0000-7000-8000-000000000001", "/name"),
			AssociatedData(nil, "orders", "0190f0f0-0000-7000-8000-000000000001", "/email"),
		} {
			if _, err := e.Open(a, other); err == nil {
				t.Fatal("an envelope opened out of its place")
			}
		}
		if _, err := e.Open(newAEAD(t), ad); err == nil {
			t.Fatal("an envelope opened under another key")
		}
		if !strings.Contains(string(env), string(SubjectNeedle(sub))) {
			t.Fatal("needle not found")
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, v := range []string{`"x"`, `{"a":1}`, `{"x-deltabus-enc":2,"sub":"AAAAAAAAAAAAAAAAAAAAAA","ct":"AA"}`,
		`{"x-deltabus-enc":1,"sub":"short","ct":"AA"}`, `{"x-deltabus-enc":1,"sub":"AAAAAAAAAAAAAAAAAAAAAA"}`,
		`{"x-deltabus-enc":1,"sub":"AAAAAAAAAAAAAAAAAAAAAA","ct":"!!"}`} {
		if _, err := Parse([]byte(v)); err == nil {
			t.Errorf("%s parsed", v)
		}
	}
}
