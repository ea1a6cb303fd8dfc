package relay

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/usererr"
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
	if ok.AppID != "" {
		t.Errorf("default appId %q, want none (the source's, resolved at start)", ok.AppID)
	}
	bad := Config{Source: "postgres://u:s3cret@localhost:99999999/db", Store: "file:///x"}.WithDefaults().Validate()
	if bad == nil || strings.Contains(bad.Error(), "s3cret") {
		t.Errorf("a bad DSN gives %v", bad)
	}
}

func TestRetryable(t *testing.T) {
	if retryable(fatalError{err: errTest}) {
		t.Error("fatal error retried")
	}
	if retryable(usererr.New(nil, "wal_level")) {
		t.Error("permanent user error retried")
	}
	if !retryable(usererr.Retry(nil, "unreachable")) || !retryable(errTest) {
		t.Error("transient error not retried")
	}
}

var errTest = errors.New("test")

func TestTopicCommitIntervalDefaultsByStore(t *testing.T) {
	for _, c := range []struct {
		store string
		set   time.Duration
		want  time.Duration
	}{
		{"s3://bucket/prefix", 0, DefaultS3CommitInterval},
		{"file:///var/lib/deltabus", 0, -1},
		{"s3://bucket/prefix", -1, -1},
		{"file:///var/lib/deltabus", 5 * time.Second, 5 * time.Second},
	} {
		got := Config{Store: c.store, TopicCommitInterval: c.set}.WithDefaults().TopicCommitInterval
		if got != c.want {
			t.Errorf("store %s, interval %v: got %v, want %v", c.store, c.set, got, c.want)
		}
	}
}

func TestTableParallelismDefaultsByStore(t *testing.T) {
	for _, c := range []struct {
		store   string
		set     int
		want    int
		refused bool
	}{
		{"s3://bucket/prefix", 0, DefaultS3TableParallelism, false},
		{"S3://bucket/prefix", 0, DefaultS3TableParallelism, false}, // as storage.Open reads it
		{"file:///var/lib/deltabus", 0, DefaultLocalTableParallelism, false},
		{"s3://bucket/prefix", 2, 2, false},
		{"file:///var/lib/deltabus", -1, -1, true},
		{"file:///var/lib/deltabus", maxTableParallelism + 1, maxTableParallelism + 1, true},
	} {
		cfg := Config{Source: "postgres://u@localhost:5432/db", Store: c.store, TableParallelism: c.set}.WithDefaults()
		if cfg.TableParallelism != c.want {
			t.Errorf("store %s, parallelism %d: got %d, want %d", c.store, c.set, cfg.TableParallelism, c.want)
		}
		err := cfg.Validate()
		if refused := err != nil; refused != c.refused || refused && !strings.Contains(err.Error(), "--table-parallelism") {
			t.Errorf("store %s, parallelism %d: Validate gives %v", c.store, c.set, err)
		}
	}
}
