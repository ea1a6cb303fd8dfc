package bench

import (
	"context"
	"fmt"
	"os"
)

// A side is a relay timed in every round of a drain beside the measured
// one, on a slot and a store of its own, on the same WAL: the relay
// without transaction records (Options.RecordsOff), whose figures say
// what the records cost, and another build (Options.OtherBin), whose
// figures say what changed between two builds, rounds alternating as the
// rest.
type sideRelay struct {
	name string // line suffix: _records_off, _other_build
	what string // for the comment lines
	spec relaySpec
}

// sides are the drains' sides o asks for.
func (o Options) sides() []sideRelay {
	var s []sideRelay
	if o.RecordsOff {
		s = append(s, sideRelay{name: "_records_off", what: "relay without transaction records",
			spec: relaySpec{args: []string{"--transaction-records=false"}}})
	}
	if o.OtherBin != "" {
		s = append(s, sideRelay{name: "_other_build", what: "other build " + o.OtherBin, spec: relaySpec{bin: o.OtherBin}})
	}
	return s
}

// sideSlot is a side's slot and store in one round.
type sideSlot struct {
	sideRelay
	slot, store string
}

// makeSides makes each side's slot and store for round i of the drain
// kind suffix (_loaded or "") of drain name.
func (b *bench) makeSides(ctx context.Context, dsn, name, suffix string, i int) ([]sideSlot, func(), error) {
	var out []sideSlot
	cleanup := func() {
		for _, s := range out {
			os.RemoveAll(s.store)
		}
	}
	for _, sd := range b.o.sides() {
		s := sideSlot{sideRelay: sd, slot: fmt.Sprintf("side%s%s_%d", sd.name, suffix, i), store: b.storeDir(name + suffix + sd.name)}
		out = append(out, s)
		if err := b.createSlotWith(ctx, sd.spec, dsn, s.store, s.slot); err != nil {
			return out, cleanup, fmt.Errorf("%s: %w", sd.what, err)
		}
	}
	return out, cleanup, nil
}

// sideLines prints a side's figures beside the measured relay's, medians
// of the rounds: its throughput and CPU per event against
// pg_recvlogical's, then the measured relay over the side, each ratio the
// median of the rounds' own (each compares two drains one after the
// other).
func (b *bench) sideLines(name string, events int, sd sideRelay, rels, refs, sides []drained) *SideDrain {
	per := func(s float64) float64 { return s / float64(events) * 1e6 }
	var vsRef, thr, cpu []float64
	for i := range sides {
		vsRef = append(vsRef, refs[i].secs/sides[i].secs)
		thr = append(thr, sides[i].secs/rels[i].secs)
		cpu = append(cpu, rels[i].cpu/sides[i].cpu)
	}
	s, rel, ref := medianDrain(sides), medianDrain(rels), medianDrain(refs)
	n := name + sd.name
	fmt.Fprintf(b.out, "%s relay=%.0fev/s reference=%.0fev/s ratio=%.2f\n", n, float64(events)/s.secs, float64(events)/ref.secs, Median(vsRef))
	b.linef(n+"_cpu_per_event", per(s.cpu), per(ref.cpu), "us")
	// The measured relay (relay=) against the side (reference=).
	fmt.Fprintf(b.out, "%s_vs%s relay=%.0fev/s reference=%.0fev/s ratio=%.2f\n", name, sd.name, float64(events)/rel.secs, float64(events)/s.secs, Median(thr))
	fmt.Fprintf(b.out, "%s_vs%s_cpu_per_event relay=%.2fus reference=%.2fus ratio=%.2f\n", name, sd.name, per(rel.cpu), per(s.cpu), Median(cpu))
	fmt.Fprintf(b.out, "# %s: the measured relay against the %s, same rounds: throughput %+.0f%%, CPU per event %+.0f%% (rounds %s; %s)\n",
		name, sd.what, (Median(thr)-1)*100, (Median(cpu)-1)*100, joinRatios(thr), joinRatios(cpu))
	return ptr(side(events, s, Median(vsRef)))
}
