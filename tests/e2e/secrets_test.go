package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/s3test"
)

// TestNoSecretInAnyOutput: with a password in the DSN (as deployments pass
// it, in DELTABUS_SOURCE) and an S3 secret key in the environment, no
// command prints either: not in --help, not for a mistyped flag, not on a
// connection failure, not in a running relay's log.
func TestNoSecretInAnyOutput(t *testing.T) {
	const pw = "pw-S3cr3t-7f1c"
	db := setup(t)
	dsn := strings.Replace(db.DSN, "postgres://postgres@", "postgres://postgres:"+pw+"@", 1)
	b := s3test.NewBucket(t)
	key := b.SecretKey // the real one: the relay must work
	env := []string{"DELTABUS_SOURCE=" + dsn, "DELTABUS_STORE=" + b.URL("bus"), "DELTABUS_S3_ENDPOINT=" + b.Endpoint,
		"DELTABUS_S3_PATH_STYLE=true", "AWS_REGION=" + b.Region, "AWS_ACCESS_KEY_ID=" + b.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + key}
	unreachable := []string{"DELTABUS_SOURCE=postgres://app:" + pw + "@127.0.0.1:1/app?connect_timeout=2"}
	badDSN := []string{"DELTABUS_SOURCE=postgres://app:" + pw + "@host:99999999/db"}
	kv := []string{"DELTABUS_SOURCE=host=127.0.0.1 port=1 user=app password=" + pw + " connect_timeout=2"}
	commands := []string{"run", "migrate", "status", "bootstrap", "rebuild", "reconcile", "janitor", "inspect", "tail", "demo", "bench", "doctor", "version"}
	var helps [][]string
	for _, c := range commands {
		helps = append(helps, []string{c, "--help"}, []string{c, "--no-such-flag"})
	}
	helps = append(helps, []string{}, []string{"help"})
	runs := [][]string{{"migrate"}, {"status"}, {"status", "--json"}, {"bootstrap"}, {"rebuild", "--topic", "Bad/Topic"},
		{"reconcile", "--last", "1h"}, {"janitor", "--dry-run"}, {"doctor"}, {"doctor", "--json"}}
	check := func(what, out string) {
		t.Helper()
		for _, secret := range []string{pw, key} {
			if strings.Contains(out, secret) {
				t.Errorf("%s prints a secret:\n%s", what, out)
			}
		}
	}
	for _, args := range append(helps, []string{"inspect", b.URL("bus") + "/orders"}) {
		_, stdout, stderr := runCLI(t, env, args...)
		check(strings.Join(append([]string{"relay"}, args...), " "), stdout+stderr)
	}
	for _, format := range []string{"text", "json"} {
		p := startRelay(t, append(env, "DELTABUS_LOG_FORMAT="+format))
		waitSlotActive(t, db.DSN, "deltabus", p)
		if format == "text" { // the other commands, beside a running relay
			for _, args := range runs {
				_, stdout, stderr := runCLI(t, env, args...)
				check(strings.Join(append([]string{"relay"}, args...), " "), stdout+stderr)
			}
		}
		if err := p.stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		check("relay run --log-format "+format, p.output())
	}
	for _, e := range [][]string{unreachable, badDSN, kv} {
		for _, args := range runs {
			_, stdout, stderr := runCLI(t, e, args...)
			check(strings.Join(append([]string{"relay"}, args...), " "), stdout+stderr)
		}
	}
	p := startRelay(t, unreachable)
	<-p.doneOnce()
	check("relay run against an unreachable database", p.output())
}
