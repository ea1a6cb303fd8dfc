package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// With Options.Personal the 1,000-row drain's events carry two personal
// fields, an email and a name, of one of personalSubjects customers (the
// data subject, /customer): ~270 bytes, like relay's
// BenchmarkPipelinePersonal. Every relay drains the same WAL; the
// personal one's store registers personalContract, which marks the two
// fields (the relay reads them from its registry, as in production: no
// --pii-schemas), and its process gets a KEK file (`relay keys init`) and
// the key table in the source database (`relay migrate --key-tables`).
const personalSubjects = 1000

// personalPayloadSQL is payloadSQL with an email and a name, and the
// customer one of personalSubjects. With 5 topics by g % 5 a customer
// (g % 1000) always falls in one topic: personalSubjects data keys.
const personalPayloadSQL = `jsonb_build_object('order_id', g, 'customer', 'customer-' || (g % 1000),
	'email', 'customer-' || (g % 1000) || '@example.com', 'name', 'Customer Number ' || (g % 1000), 'amount', (g % 1000) * 1.25,
	'currency', 'EUR', 'lines', jsonb_build_array(jsonb_build_object('sku', 'sku-' || (g % 777), 'qty', g % 5 + 1)),
	'note', 'a realistic order created event with some padding text')`

const insertPersonalRowsSQL = `INSERT INTO outbox (topic, key, type, payload)
	SELECT (ARRAY['orders','payments','tenants','ingestion','quality'])[1 + g % 5], 'k' || (g % 1000), 'Created', ` + personalPayloadSQL + `
	FROM generate_series($1::bigint, $2::bigint) g`

// personalContract is payloadContract with the email and the name,
// both personal, and the customer as the data subject.
const personalContract = `{"type":"object","x-deltabus-subject":"/customer","required":["order_id","customer","email","name","amount","currency","lines","note"],
	"properties":{"order_id":{"type":"integer","minimum":0},"customer":{"type":"string","minLength":1,"maxLength":64},
	"email":{"type":"string","maxLength":254,"x-deltabus-pii":true},"name":{"type":"string","maxLength":200,"x-deltabus-pii":true},
	"amount":{"type":"number","minimum":0},"currency":{"enum":["EUR","USD","GBP"]},
	"lines":{"type":"array","minItems":1,"items":{"type":"object","required":["sku","qty"],
	"properties":{"sku":{"type":"string","pattern":"^sku-[0-9]+$"},"qty":{"type":"integer","minimum":1}},"additionalProperties":false}},
	"note":{"type":"string","maxLength":200}},"additionalProperties":false}`

// personalSetup is what the personal relays of a drain share: the KEK
// file, in dir.
type personalSetup struct{ dir, kek string }

// env is the personal relay's environment.
func (p personalSetup) env() []string { return []string{"DELTABUS_KEK=file://" + p.kek} }

// setupPersonal writes a KEK with `relay keys init` and creates the key
// table in the source database with `relay migrate --key-tables`.
func (b *bench) setupPersonal(ctx context.Context, dsn string) (personalSetup, error) {
	dir, err := os.MkdirTemp("", "deltabus-bench-personal-")
	if err != nil {
		return personalSetup{}, err
	}
	p := personalSetup{dir: dir, kek: filepath.Join(dir, "kek.json")}
	if err := b.relayCommand(ctx, nil, "keys", "init", "--kek-file", p.kek); err != nil {
		return p, err
	}
	if err := b.relayCommand(ctx, append(p.env(), "DELTABUS_SOURCE="+dsn), "migrate", "--key-tables"); err != nil {
		return p, err
	}
	return p, nil
}

// relayCommand runs the measured relay binary once to its end.
func (b *bench) relayCommand(ctx context.Context, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, b.self, args...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("relay %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// contractOf is the contract of the contracts-only relay: with personal
// data, personalContract without its marks, so that both relays validate
// the same events against the same rules.
func contractOf(personal bool) string {
	if !personal {
		return payloadContract
	}
	s := strings.ReplaceAll(personalContract, `,"x-deltabus-pii":true`, "")
	return strings.Replace(s, `"x-deltabus-subject":"/customer",`, "", 1)
}

// checkPersonal fails when the personal relay dead-lettered any event or
// wrote a personal value in clear: the measurement would then not be of
// encrypted events.
func checkPersonal(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "_dead_letter")); err == nil {
		return fmt.Errorf("the relay with personal data sent events to _dead_letter in %s", dir)
	}
	found := false
	err := filepath.WalkDir(filepath.Join(dir, "orders"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".parquet") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "@example.com") {
			return fmt.Errorf("%s holds an email in clear: the personal relay did not encrypt", path)
		}
		found = found || strings.Contains(string(b), "x-deltabus-enc")
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("no envelope in the personal relay's orders table in %s", dir)
	}
	return err
}

// personalLines prints the personal relay's figures beside the others of
// the same rounds, medians: CPU per event of the relay plain, with
// contracts only (cons, when measured), encrypting, and pg_recvlogical's,
// and the ratio of encrypting to contracts only (to plain without
// contracts). It returns the personal relay's result and that ratio.
func (b *bench) personalLines(name string, events int, rel, ref drained, cons, pers []drained, ratios []float64) (*SideDrain, float64) {
	per := func(s float64) float64 { return s / float64(events) * 1e6 }
	p := medianDrain(pers)
	fmt.Fprintf(b.out, "%s_personal relay=%.0fev/s reference=%.0fev/s ratio=%.2f\n", name, float64(events)/p.secs, float64(events)/ref.secs, Median(ratios))
	b.linef(name+"_personal_cpu_per_event", per(p.cpu), per(ref.cpu), "us")
	base, what := rel, "plain"
	if len(cons) > 0 {
		base, what = medianDrain(cons), "contracts only"
	}
	fmt.Fprintf(b.out, "# %s: relay CPU per event plain %.2f us, contracts only %.2f us, two personal fields %.2f us (%.2fx %s), pg_recvlogical %.2f us, same run\n",
		name, per(rel.cpu), per(base.cpu), per(p.cpu), p.cpu/base.cpu, what, per(ref.cpu))
	b.linef(name+"_personal_over_contracts_cpu", p.cpu/base.cpu, 1.3, "x")
	return ptr(side(events, p, Median(ratios))), p.cpu / base.cpu
}
