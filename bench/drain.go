package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// payloadSQL builds a ~213-byte JSON payload per row, like the measurements
// in the design notes.
const payloadSQL = `jsonb_build_object('order_id', g, 'customer', 'customer-' || (g % 9973), 'amount', (g % 1000) * 1.25,
	'currency', 'EUR', 'lines', jsonb_build_array(jsonb_build_object('sku', 'sku-' || (g % 777), 'qty', g % 5 + 1)),
	'note', 'a realistic order created event with some padding text')`

const insertRowsSQL = `INSERT INTO outbox (topic, key, type, payload)
	SELECT (ARRAY['orders','payments','tenants','ingestion','quality'])[1 + g % 5], 'k' || (g % 1000), 'Created', ` + payloadSQL + `
	FROM generate_series($1::bigint, $2::bigint) g`

// drainBatched: events in 1000-row transactions, relay vs pg_recvlogical.
func (b *bench) drainBatched(ctx context.Context) error {
	rows := insertRowsSQL
	if b.o.Personal {
		rows = insertPersonalRowsSQL
	}
	return b.drain(ctx, "drain_1000row_tx", b.o.Events, b.o.Personal, func(ctx context.Context, dsn string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		for i := 0; i < b.o.Events; i += 1000 {
			if _, err := conn.Exec(ctx, rows, i, min(i+999, b.o.Events-1)); err != nil {
				return err
			}
		}
		return nil
	})
}

// drainSingle: single-row transactions (the usual outbox shape).
func (b *bench) drainSingle(ctx context.Context) error {
	return b.drain(ctx, "drain_single_row_tx", b.o.Single, false, func(ctx context.Context, dsn string) error {
		return loadSingle(ctx, dsn, b.o.Single, 4, 0, 0)
	})
}

// loadSingle inserts n single-row transactions from `workers` connections,
// paced to rate per second when rate > 0 (or for at most d).
func loadSingle(ctx context.Context, dsn string, n, workers, rate int, d time.Duration) error {
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(ctx)
			for i := w; i < n; i += workers {
				if rate > 0 {
					due := start.Add(time.Duration(float64(i) / float64(rate) * float64(time.Second)))
					if d > 0 && time.Since(start) > d {
						return
					}
					time.Sleep(time.Until(due))
				}
				if _, err := conn.Exec(ctx, insertRowsSQL, i, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// drain loads `events` rows after every slot exists, then times
// pg_recvlogical and the relay draining the same WAL: Options.Rounds
// times each, unloaded and (Options.Loaded) beside a CPU hog, alternating
// which goes first so that the machine's drift falls on both. With
// personal, each round also times a relay that encrypts two personal
// fields of every event (personal.go).
func (b *bench) drain(ctx context.Context, name string, events int, personal bool, load func(context.Context, string) error) error {
	dsn, drop, err := b.freshDB(ctx)
	if err != nil {
		return err
	}
	defer drop()
	var ps personalSetup
	if personal {
		if ps, err = b.setupPersonal(ctx, dsn); err != nil {
			return err
		}
		defer os.RemoveAll(ps.dir)
	}
	kinds := []drainKind{{suffix: ""}}
	if b.o.Loaded {
		kinds = append(kinds, drainKind{suffix: "_loaded", hog: true})
	}
	for k := range kinds {
		for i := range max(b.o.Rounds, 1) {
			v := drainVariant{slot: fmt.Sprintf("deltabus%s_%d", kinds[k].suffix, i), ref: fmt.Sprintf("ref%s_%d", kinds[k].suffix, i)}
			v.store = b.storeDir(name + kinds[k].suffix)
			defer os.RemoveAll(v.store)
			if err := b.createRelaySlot(ctx, dsn, v.store, v.slot); err != nil {
				return err
			}
			if b.o.Contracts {
				v.cslot, v.cstore = fmt.Sprintf("contracts%s_%d", kinds[k].suffix, i), b.storeDir(name+kinds[k].suffix+"_contracts")
				defer os.RemoveAll(v.cstore)
				if err := b.createRelaySlot(ctx, dsn, v.cstore, v.cslot); err != nil {
					return err
				}
				if err := registerContracts(ctx, v.cstore, contractOf(personal)); err != nil {
					return err
				}
			}
			if personal {
				v.pslot, v.pstore, v.penv = fmt.Sprintf("personal%s_%d", kinds[k].suffix, i), b.storeDir(name+kinds[k].suffix+"_personal"), ps.env()
				defer os.RemoveAll(v.pstore)
				if err := b.createRelaySlot(ctx, dsn, v.pstore, v.pslot); err != nil {
					return err
				}
				if err := registerContracts(ctx, v.pstore, personalContract); err != nil {
					return err
				}
			}
			sides, cleanup, err := b.makeSides(ctx, dsn, name, kinds[k].suffix, i)
			defer cleanup()
			if err != nil {
				return err
			}
			v.sides = sides
			if b.o.Control {
				v.ctl = fmt.Sprintf("ctl%s_%d", kinds[k].suffix, i)
			}
			for _, ref := range []string{v.ref, v.ctl} {
				if ref == "" {
					continue
				}
				if err := execSQL(ctx, dsn, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, ref); err != nil {
					return err
				}
			}
			kinds[k].rounds = append(kinds[k].rounds, v)
		}
	}
	t0 := time.Now()
	if err := load(ctx, dsn); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	end, err := walInsertLSN(ctx, dsn)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "# %s: loaded %d events in %.1fs; WAL to drain ends at %s\n", name, events, time.Since(t0).Seconds(), end)
	for _, k := range kinds {
		if err := b.drainKind(ctx, name+k.suffix, events, dsn, end, k); err != nil {
			return err
		}
	}
	return nil
}

// drainKind is one kind of side-by-side drain (unloaded, or beside a CPU
// hog) and its rounds.
type drainKind struct {
	suffix string
	hog    bool
	rounds []drainVariant
}

// drainVariant is one round: the relay's slot and store, pg_recvlogical's
// slot.
// With Options.Contracts, cslot and cstore are a relay's whose store
// holds a contract for every event (registerContracts); with personal
// data, pslot and pstore are a relay's that encrypts two fields of every
// event, in environment penv (personal.go).
type drainVariant struct {
	slot, ref, ctl, store, cslot, cstore, pslot, pstore string
	penv                                                []string
	sides                                               []sideSlot // sides.go
}

// round is what one round measured: the relay, pg_recvlogical, the
// control, the relay with contracts and the relay with personal data.
type round struct {
	rel, ref, ctl, con, per drained
	sides                   []drained // as drainVariant.sides
}

// drainKind runs a kind's rounds and prints its figures: the medians of
// the rounds when there are several.
func (b *bench) drainKind(ctx context.Context, name string, events int, dsn, end string, k drainKind) error {
	if k.hog {
		stop := hogCore()
		defer stop()
	}
	var rels, refs, cons, pers []drained
	sides := make([][]drained, len(b.o.sides()))
	var ratios, controls, conRatios, perRatios []float64
	for i, v := range k.rounds {
		r, err := b.drainRound(ctx, dsn, end, v, i%2 == 1)
		if err != nil {
			return err
		}
		ref, rel, ctl := r.ref, r.rel, r.ctl
		fmt.Fprintf(b.out, "# %s round %d: relay %.1fs wall, %.2fs CPU, walsender %.2fs CPU; pg_recvlogical %.1fs wall, %.2fs CPU, walsender %.2fs CPU (ratio %.2f)\n",
			name, i+1, rel.secs, rel.cpu, rel.server, ref.secs, ref.cpu, ref.server, ref.secs/rel.secs)
		if v.ctl != "" {
			fmt.Fprintf(b.out, "# %s round %d control: pg_recvlogical again %.1fs wall, %.2fs CPU, walsender %.2fs CPU (ratio %.2f)\n",
				name, i+1, ctl.secs, ctl.cpu, ctl.server, ref.secs/ctl.secs)
			controls = append(controls, ref.secs/ctl.secs)
		}
		if v.cslot != "" {
			fmt.Fprintf(b.out, "# %s round %d contracts: relay with a contract on every event %.1fs wall, %.2fs CPU, walsender %.2fs CPU (ratio %.2f)\n",
				name, i+1, r.con.secs, r.con.cpu, r.con.server, ref.secs/r.con.secs)
			cons, conRatios = append(cons, r.con), append(conRatios, ref.secs/r.con.secs)
		}
		if v.pslot != "" {
			fmt.Fprintf(b.out, "# %s round %d personal: relay encrypting two personal fields of every event %.1fs wall, %.2fs CPU, walsender %.2fs CPU (ratio %.2f)\n",
				name, i+1, r.per.secs, r.per.cpu, r.per.server, ref.secs/r.per.secs)
			pers, perRatios = append(pers, r.per), append(perRatios, ref.secs/r.per.secs)
		}
		for j, sd := range v.sides {
			d := r.sides[j]
			fmt.Fprintf(b.out, "# %s round %d %s: %.1fs wall, %.2fs CPU, walsender %.2fs CPU (ratio %.2f)\n",
				name, i+1, sd.what, d.secs, d.cpu, d.server, ref.secs/d.secs)
			sides[j] = append(sides[j], d)
		}
		rels, refs, ratios = append(rels, rel), append(refs, ref), append(ratios, ref.secs/rel.secs)
	}
	if len(controls) > 0 {
		fmt.Fprintf(b.out, "# %s control: pg_recvlogical against itself, ratio %.2f (median; rounds %s): how far the relay's ratio moves by chance\n",
			name, Median(controls), joinRatios(controls))
	}
	rel, ref := medianDrain(rels), medianDrain(refs)
	res := drainResult(name, events, k.hog, rel, ref, ratios, controls)
	// The ratio is the median of the rounds' own: each compares two
	// drains that ran one after the other.
	fmt.Fprintf(b.out, "%s relay=%.0fev/s reference=%.0fev/s ratio=%.2f\n", name, float64(events)/rel.secs, float64(events)/ref.secs, Median(ratios))
	per := func(s float64) float64 { return s / float64(events) * 1e6 }
	b.linef(name+"_cpu_per_event", per(rel.cpu), per(ref.cpu), "us")
	b.linef(name+"_cpu_per_event_with_walsender", per(rel.cpu+rel.server), per(ref.cpu+ref.server), "us")
	fmt.Fprintf(b.out, "%s_peak_rss relay=%.0fMiB reference=200MiB ratio=%.2f\n", name, rel.rss, rel.rss/200)
	if len(cons) > 0 {
		con := medianDrain(cons)
		fmt.Fprintf(b.out, "%s_contracts relay=%.0fev/s reference=%.0fev/s ratio=%.2f\n", name, float64(events)/con.secs, float64(events)/ref.secs, Median(conRatios))
		b.linef(name+"_contracts_cpu_per_event", per(con.cpu), per(ref.cpu), "us")
		fmt.Fprintf(b.out, "# %s: relay CPU per event with a contract on every event %.2f us, without %.2f us (%+.0f%%), same run\n",
			name, per(con.cpu), per(rel.cpu), (con.cpu/rel.cpu-1)*100)
		res.Contracts = ptr(side(events, con, Median(conRatios)))
	}
	if len(pers) > 0 {
		res.Personal, res.PersonalOverContracts = b.personalLines(name, events, rel, ref, cons, pers, perRatios)
	}
	for j, sd := range b.o.sides() {
		if len(sides[j]) == 0 {
			continue
		}
		d := b.sideLines(name, events, sd, rels, refs, sides[j])
		if res.Sides == nil {
			res.Sides = map[string]*SideDrain{}
		}
		res.Sides[sd.name[1:]] = d
	}
	b.res.Drains = append(b.res.Drains, res)
	return nil
}

// drainRound times pg_recvlogical and the relay on one round's slots, the
// relay first when relayFirst; the control, if the round has one, takes the
// relay's place on the other side of pg_recvlogical.
func (b *bench) drainRound(ctx context.Context, dsn, end string, v drainVariant, relayFirst bool) (r round, err error) {
	steps := []func() error{
		func() (err error) { r.rel, err = b.relayDrain(ctx, dsn, v.store, v.slot, end); return err },
	}
	if v.pslot != "" {
		steps = append(steps, func() (err error) {
			if r.per, err = b.relayDrainEnv(ctx, dsn, v.pstore, v.pslot, end, v.penv); err != nil {
				return err
			}
			return checkPersonal(v.pstore)
		})
	}
	if v.cslot != "" {
		steps = append(steps, func() (err error) {
			if r.con, err = b.relayDrain(ctx, dsn, v.cstore, v.cslot, end); err != nil {
				return err
			}
			return checkAllValid(v.cstore)
		})
	}
	r.sides = make([]drained, len(v.sides))
	for j, sd := range v.sides {
		steps = append(steps, func() (err error) {
			r.sides[j], err = b.relayDrainSpec(ctx, sd.spec, dsn, sd.store, sd.slot, end, nil)
			return err
		})
	}
	steps = append(steps, func() (err error) { r.ref, err = b.recvlogical(ctx, dsn, v.ref, end); return err })
	if v.ctl != "" {
		steps = append(steps, func() (err error) { r.ctl, err = b.recvlogical(ctx, dsn, v.ctl, end); return err })
	}
	if !relayFirst {
		slices.Reverse(steps)
	}
	for _, step := range steps {
		if err = step(); err != nil {
			return
		}
	}
	return
}

// joinRatios formats ratios as "0.97 / 1.02 / 0.99".
func joinRatios(v []float64) string {
	s := make([]string, len(v))
	for i, r := range v {
		s[i] = strconv.FormatFloat(r, 'f', 2, 64)
	}
	return strings.Join(s, " / ")
}

// medianDrain is the median of each figure over the rounds (the largest
// peak RSS).
func medianDrain(ds []drained) drained {
	med := func(f func(drained) float64) float64 {
		v := make([]float64, len(ds))
		for i, d := range ds {
			v[i] = f(d)
		}
		return Median(v)
	}
	out := drained{secs: med(func(d drained) float64 { return d.secs }), cpu: med(func(d drained) float64 { return d.cpu }),
		server: med(func(d drained) float64 { return d.server })}
	for _, d := range ds {
		out.rss = max(out.rss, d.rss)
	}
	return out
}

// drained is what one drain of a slot cost: wall seconds, CPU seconds
// (user+system) and peak RSS in MiB.
type drained struct{ secs, cpu, server, rss float64 }

func (b *bench) storeDir(name string) string {
	dir, _ := os.MkdirTemp("", "deltabus-bench-"+name+"-")
	return dir
}

// createRelaySlot lets the relay make its slot (first start) on the empty
// outbox, then stops it: the slot then holds the WAL of the load.
func (b *bench) createRelaySlot(ctx context.Context, dsn, store, slot string) error {
	return b.createSlotWith(ctx, relaySpec{}, dsn, store, slot)
}

// createSlotWith is createRelaySlot with the relay of spec (its binary:
// a store is made by the build that drains it).
func (b *bench) createSlotWith(ctx context.Context, spec relaySpec, dsn, store, slot string) error {
	p, err := b.startSpec(spec, dsn, store, slot, nil)
	if err != nil {
		return err
	}
	if err := waitFirstStart(ctx, dsn, store, slot); err != nil {
		_ = p.Process.Kill()
		return err
	}
	_ = p.Process.Signal(syscall.SIGTERM)
	_ = p.Wait()
	return waitSlot(ctx, dsn, slot, false, time.Minute)
}

func (b *bench) startRelay(dsn, store, slot string, env []string, extra ...string) (*exec.Cmd, error) {
	return b.startSpec(relaySpec{}, dsn, store, slot, env, extra...)
}

// relaySpec is a relay other than the measured one, timed beside it
// (sides.go): another binary (bin, "" for the measured one) or flags of
// its own (args, after Options.RelayArgs).
type relaySpec struct {
	bin  string
	args []string
}

func (b *bench) startSpec(spec relaySpec, dsn, store, slot string, env []string, extra ...string) (*exec.Cmd, error) {
	if !strings.Contains(store, "://") {
		store = "file://" + store
	}
	bin := spec.bin
	if bin == "" {
		bin = b.self
	}
	// DELTABUS_BENCH_METRICS=host:port exposes the measured relay's
	// /metrics and /debug/pprof for profiling a run.
	args := append([]string{"run", "--metrics-addr", os.Getenv("DELTABUS_BENCH_METRICS"), "--log-level", "warn", "--slot", slot}, append(extra, strings.Fields(b.o.RelayArgs)...)...)
	cmd := exec.Command(bin, append(args, spec.args...)...)
	cmd.Env = append(append(os.Environ(), "DELTABUS_SOURCE="+dsn, "DELTABUS_STORE="+store), env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, cmd.Start()
}

// recvlogical times pg_recvlogical draining slot "ref" to end.
func (b *bench) recvlogical(ctx context.Context, dsn, slot, end string) (drained, error) {
	start := time.Now()
	server := b.watchWalsender(ctx, dsn, slot)
	cmd := exec.CommandContext(ctx, b.o.RecvlogicalBin, "-d", dsn, "-S", slot, "--start", "--endpos="+end, "--no-loop",
		"-o", "proto_version=1", "-o", "publication_names=deltabus", "-f", "/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		return drained{}, fmt.Errorf("pg_recvlogical: %v: %s", err, out)
	}
	st := cmd.ProcessState
	return drained{secs: time.Since(start).Seconds(), cpu: (st.UserTime() + st.SystemTime()).Seconds(), server: server()}, nil
}

// relayDrain times a relay process from start until it exits by itself
// at end (`--stop-at`, as pg_recvlogical's --endpos): nothing polls the
// database meanwhile, which would take CPU from the walsender the drain
// waits on (a query every 10 ms cost its backend 2-3% of the walsender's
// CPU, in the relay's rounds only).
func (b *bench) relayDrain(ctx context.Context, dsn, store, slot, end string) (drained, error) {
	return b.relayDrainEnv(ctx, dsn, store, slot, end, nil)
}

// relayDrainEnv is relayDrain with env added to the relay's environment.
func (b *bench) relayDrainEnv(ctx context.Context, dsn, store, slot, end string, env []string) (drained, error) {
	return b.relayDrainSpec(ctx, relaySpec{}, dsn, store, slot, end, env)
}

// relayDrainSpec is relayDrainEnv with the relay of spec.
func (b *bench) relayDrainSpec(ctx context.Context, spec relaySpec, dsn, store, slot, end string, env []string) (drained, error) {
	start := time.Now()
	server := b.watchWalsender(ctx, dsn, slot)
	p, err := b.startSpec(spec, dsn, store, slot, env, "--stop-at", end)
	if err != nil {
		server()
		return drained{}, err
	}
	stop := context.AfterFunc(ctx, func() { _ = p.Process.Kill() })
	defer stop()
	werr := p.Wait()
	secs := time.Since(start).Seconds()
	srv := server()
	if werr != nil {
		return drained{}, fmt.Errorf("relay run --stop-at %s: %w", end, werr)
	}
	if ok, err := confirmed(ctx, dsn, slot, end); err != nil {
		return drained{}, fmt.Errorf("after relay run --stop-at %s: %w", end, err)
	} else if !ok {
		return drained{}, fmt.Errorf("relay run --stop-at %s exited 0 before slot %s confirmed it", end, slot)
	}
	st := p.ProcessState
	var rss float64
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		rss = float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	return drained{secs: secs, cpu: (st.UserTime() + st.SystemTime()).Seconds(), rss: rss, server: srv}, nil
}

// Median is the median of v (the mean of the middle two of an even
// count); v is left as it is. The benchmarks of other packages report
// their repeated figures with it.
func Median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
