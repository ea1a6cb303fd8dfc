package main

import (
	"context"
	"fmt"
	"time"

	"github.com/deltabus/deltabus/bench"
	"github.com/deltabus/deltabus/pgcluster"
)

// cmdBench measures the relay against this machine's own limit (package
// bench).
func cmdBench(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "bench", "[flags]")
	var o bench.Options
	fs.StringVar(&o.Source, "source", "", "PostgreSQL DSN of a superuser (default: start a throwaway cluster)")
	fs.IntVar(&o.Events, "events", 1_000_000, "events to drain in 1000-row transactions")
	fs.IntVar(&o.Single, "single", 200_000, "single-row transactions to drain")
	fs.IntVar(&o.Big, "big", 1_000_000, "rows in one transaction (big), and in the memory run's one transaction and backlog")
	fs.DurationVar(&o.LatencyFor, "latency-for", 60*time.Second, "duration of the steady-load latency run")
	fs.IntVar(&o.Rate, "rate", 2000, "single-row transactions per second in the latency run")
	fs.BoolVar(&o.Loaded, "loaded", true, "repeat each drain with a CPU hog spinning on one core (lines suffixed _loaded)")
	fs.IntVar(&o.Rounds, "rounds", 3, "time each drain this many times, relay and pg_recvlogical in turn (which goes first alternating); the figures are the medians")
	fs.BoolVar(&o.Control, "control", true, "also time a second pg_recvlogical in each round (# ... control lines): two runs of the same tool, the resolution of the ratios")
	fs.BoolVar(&o.Contracts, "contracts", true, "also time, in each round, a relay whose store holds a contract for every event (lines suffixed _contracts): the cost of validating every event")
	fs.BoolVar(&o.Personal, "personal", true, "give the 1000-row drain's events an email and a name and also time, in each round, a relay that encrypts both (lines suffixed _personal): the cost of personal data against contracts only")
	fs.BoolVar(&o.RecordsOff, "records-off", true, "also time, in each round, a relay with --transaction-records=false (lines suffixed _records_off, _vs_records_off): what the transaction records cost the drain")
	fs.StringVar(&o.OtherBin, "other-relay-bin", "", "also time, in each round, this other relay build on the same WAL (lines suffixed _other_build, _vs_other_build), e.g. an older commit's, to find what a change cost")
	fs.StringVar(&o.Only, "only", "", "comma-separated subset: batch,single,big,topics,latency,startup,fanin,memory")
	fs.StringVar(&o.FaninSources, "fanin-sources", "2,4", "fan-in run: counts of sources (PostgreSQL clusters) sharing five topics, comma-separated")
	fs.IntVar(&o.FaninEvents, "fanin-events", 20_000, "fan-in drain: single-row transactions per source")
	fs.IntVar(&o.FaninRate, "fanin-rate", 200, "fan-in steady load: single-row transactions per second per source")
	fs.DurationVar(&o.FaninFor, "fanin-for", 20*time.Second, "fan-in steady load: duration of each run")
	fs.StringVar(&o.FaninStore, "fanin-store", "", "fan-in run: base store URL, e.g. s3://bucket/prefix (default: a local temp dir)")
	fs.StringVar(&o.FaninName, "fanin-name", "fanin", "name of the fan-in lines and JSON results (fanin_s3: fanin_s3_2_...)")
	fs.StringVar(&o.MemoryStore, "memory-store", "", "store URL under which the memory run makes a table per shape, e.g. s3://bucket/prefix (default: a local temp dir)")
	fs.StringVar(&o.MemoryShapes, "memory-shapes", "", "memory run: comma-separated subset of its shapes: one_tx,backlog,topics_300_then_1000,topics_10000 (default all)")
	fs.StringVar(&o.LatencyStore, "latency-store", "", "store URL for the latency run, e.g. s3://bucket/prefix (default: a local temp dir)")
	fs.StringVar(&o.LatencyWatch, "latency-watch", "", "for an S3 latency store: the folder where the S3 server keeps its objects as files (versitygw's posix backend keeps s3://BUCKET/PREFIX in DATA/BUCKET/PREFIX); commits are then timed when they appear there, as on local disk, instead of by their commitInfo timestamp, taken before the PUT")
	fs.StringVar(&o.LatencyName, "latency-name", "latency", "name of the latency run's lines and JSON result (latency_s3: latency_s3_p50, ...)")
	fs.BoolVar(&o.LatencyGroup, "latency-group", false, "put the latency run's five topics in one topic group (one commit of one table per batch)")
	fs.BoolVar(&o.LatencyFloor, "latency-floor", true, "after the latency run, put the same load on a fresh database streamed by pg_recvlogical: the delivery latency the relay's adds its commit to")
	jsonOut := fs.String("json", "", "also write the figures as JSON to this file (bench/charts draws them)")
	fs.StringVar(&o.RelayArgs, "relay-args", "", "extra flags for the measured `relay run`, space-separated (e.g. \"--batch-max-delay 200ms\")")
	fs.StringVar(&o.RecvlogicalBin, "pg-recvlogical", pgcluster.BinDir+"/pg_recvlogical", "pg_recvlogical binary")
	fs.StringVar(&o.RelayBin, "relay-bin", "", "relay binary measured (default: this one), e.g. an older build to compare with")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	res, err := bench.Run(ctx, env.stdout, o)
	if *jsonOut != "" {
		if werr := res.WriteFile(*jsonOut); werr != nil && err == nil {
			err = fmt.Errorf("write --json %s: %w", *jsonOut, werr)
		}
	}
	if err != nil {
		return fail(env, exitFailure, err)
	}
	return exitOK
}
