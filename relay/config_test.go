package relay

import (
	"strings"
	"testing"
)

func TestValidateNamesEveryProblem(t *testing.T) {
	err := Config{Slot: "Bad-Slot", Store: "ftp://x"}.WithDefaults().Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"DELTABUS_SOURCE", "unsupported scheme", "slot name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	ok := Config{Source: "postgres://u@localhost:5432/db", Store: "s3://bucket/prefix"}.WithDefaults()
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	if ok.AppID != "deltabus-deltabus" {
		t.Errorf("default appId %q", ok.AppID)
	}
}

func TestStoreURLs(t *testing.T) {
	for raw, valid := range map[string]bool{
		"file:///var/lib/deltabus": true, "s3://bucket": true, "s3://bucket/a/b": true,
		"": false, "file://relative": false, "s3:///nobucket": false, "gs://b": false,
	} {
		if err := ValidateStoreURL(raw); (err == nil) != valid {
			t.Errorf("ValidateStoreURL(%q) = %v, want valid=%v", raw, err, valid)
		}
	}
}

func TestRedactRemovesPasswords(t *testing.T) {
	for _, in := range []string{
		"cannot parse postgres://app:s3cret@db:5432/x",
		"host=db password=s3cret user=app",
	} {
		if out := redact(in); strings.Contains(out, "s3cret") {
			t.Errorf("redact(%q) = %q", in, out)
		}
	}
}

func TestRetryable(t *testing.T) {
	if retryable(fatalError{err: ErrTest}) {
		t.Error("fatal error retried")
	}
	if retryable(&UserError{Msg: "wal_level"}) {
		t.Error("permanent user error retried")
	}
	if !retryable(&UserError{Msg: "unreachable", Retryable: true}) || !retryable(ErrTest) {
		t.Error("transient error not retried")
	}
}

var ErrTest = errTest{}

type errTest struct{}

func (errTest) Error() string { return "test" }
