package pgsource

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func TestRedactRemovesPasswords(t *testing.T) {
	for _, in := range []string{
		"cannot parse postgres://app:s3cret@db:5432/x",
		"host=db password=s3cret user=app",
		"host=db password='s3 cret' user=app",
		"postgresql://app:s3cret@db/x?sslmode=disable and postgres://b:s3cret@h/y",
	} {
		if out := Redact(in); strings.Contains(out, "s3cret") || strings.Contains(out, "s3 cret") {
			t.Errorf("Redact(%q) = %q", in, out)
		}
	}
}

func TestConnectErrorIsOneCleanLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = Connect(ctx, "postgres://app:s3cret@"+addr+"/db?sslmode=disable")
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	msg := err.Error()
	for _, bad := range []string{"s3cret", "\n", "\t", "DELTABUS_SOURCE"} {
		if strings.Contains(msg, bad) {
			t.Errorf("error %q contains %q", msg, bad)
		}
	}
	if !strings.Contains(msg, addr) || !strings.Contains(msg, "connection refused") || strings.Count(msg, "refused") != 1 {
		t.Errorf("error %q: want the address once and the cause once", msg)
	}
	if d := Describe("postgres://app:s3cret@db:5433/x"); d != "app@db:5433/x" {
		t.Errorf("Describe = %q", d)
	}
}

// TestMultiHostDescribed: an HA DSN (every host, target_session_attrs) is
// named by all its hosts, never its password, and a failure to reach any
// host says which were tried.
func TestMultiHostDescribed(t *testing.T) {
	dsn := "postgres://relay:s3cret@10.0.0.1:5432,10.0.0.2:5433/app?target_session_attrs=read-write&sslmode=disable"
	if got, want := Describe(dsn), "relay@10.0.0.1:5432,10.0.0.2:5433/app"; got != want {
		t.Fatalf("Describe = %q, want %q", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Connect(ctx, "postgres://relay:s3cret@127.0.0.1:1,127.0.0.1:2/app?target_session_attrs=read-write&sslmode=disable&connect_timeout=2")
	if err == nil {
		t.Fatal("connected to closed ports")
	}
	msg := err.Error()
	if !strings.Contains(msg, "127.0.0.1:1, 127.0.0.1:2 (for the DSN's target_session_attrs)") || strings.Contains(msg, "s3cret") {
		t.Fatalf("error %q: want both hosts and the attributes, no password", msg)
	}
}
