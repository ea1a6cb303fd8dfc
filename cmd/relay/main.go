// Command relay moves transactional-outbox events from PostgreSQL's logical
// replication stream into Delta Lake topic tables, exactly once and in source
// commit order. Run `relay help` for the commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/relay"
)

// Version is set at build time with -ldflags "-X main.Version=...".
var Version = "0.1.0-dev"

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // runtime failure or divergence found
	exitUsage   = 2 // bad flags, bad config, unreadable input
)

type command struct {
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) int
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"run":     {"stream outbox events into Delta topic tables (the daemon)", cmdRun},
		"migrate": {"create the outbox table, its index and the publication (idempotent)", cmdMigrate},
		"demo":    {"run everything on embedded defaults: throwaway PostgreSQL, local store, demo producer", cmdDemo},
		"inspect": {"print a Delta table's snapshot (version, protocol, metadata, files, records, txns)", cmdInspect},
		"tail":    {"print a Delta table's change feed as JSON lines, or --topic T's rows from the table that holds it", cmdTail},
		"status":  {"show the slot, WAL held back and every topic's position", cmdStatus},
		"doctor":  {"check every precondition of `relay run` on the database and the store, each with its fix", cmdDoctor},
		"version": {"print the version", cmdVersion},
		"bench":   {"measure the relay against pg_recvlogical on this machine (throughput, memory, latency)", cmdBench},

		"reconcile": {"compare the outbox with the topic tables per closed window; exact missing/unexpected/duplicate ids", cmdReconcile},
		"bootstrap": {"copy existing outbox rows into the topics (first start), or --recover a lost slot", cmdBootstrap},
		"rebuild":   {"re-snapshot one topic while the relay streams the others (rebuild a lost table), or --abort a stuck one", cmdRebuild},
		"janitor":   {"delete outbox rows older than the retention that the relay has made durable, in small batches", cmdJanitor},
		"consume":   {"read a topic as a consumer group, checkpointed, as JSON lines (--follow to keep reading)", cmdConsume},
		"serve":     {"serve consumer groups to parallel members in any language over HTTP: receive, ack, nack, per-key order", cmdServe},
		"members":   {"list groups served to parallel members; protect one against retention (`members protect --group G --topic T --max-hold 168h`)", cmdMembers},
		"check":     {"check consumers: lag, retention headroom, completeness and duplicates per group and topic", cmdCheck},
		"contract":  {"event contracts: register, compat, list, show, check, policy, mode (JSON Schemas per topic and type)", cmdContract},

		"deadletter": {"dead letters: list, show, redrive those their topic now admits, release a topic its circuit breaker holds", cmdDeadletter},

		"compact":   {"bin-pack small files of the tables, a group's into files of one topic each (commits that change no data)", cmdCompact},
		"vacuum":    {"delete expired log entries and data files no reader within the retention needs", cmdVacuum},
		"retention": {"show or set a topic's or a topic group's log and file retention", cmdRetention},

		"groups":  {"list topic groups, or `groups create NAME --topics 'metrics.*'`: many low-rate topics sharing one table and one commit", cmdGroups},
		"topics":  {"list topics with owner, description, retention, sources, contracts and personal columns; `topics describe` sets owner and description", cmdTopics},
		"catalog": {"`catalog sync`: register every topic in Unity Catalog as an external Delta table (idempotent)", cmdCatalog},

		"keys":  {"keys init --kek-file F: write a new key-encryption key (KEK) for personal data", cmdKeys},
		"erase": {"erase a data subject: delete its keys (its stored fields become unreadable), its outbox rows, record it in _erasures", cmdErase},

		"healthcheck": {"exit 0 if the relay at --addr (DELTABUS_METRICS_ADDR) is streaming (GET /readyz), 1 otherwise", cmdHealthcheck},
	}
}

// cliEnv is what commands write to; tests swap it.
type cliEnv struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

func main() {
	env := &cliEnv{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	relay.TuneRuntime()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(runCLI(ctx, env, os.Args[1:]))
}

func runCLI(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		usage(env.stderr)
		return exitUsage
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(env.stdout)
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" {
		return cmdVersion(ctx, env, nil)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.stderr, "relay: unknown command %q; run `relay help` for the list\n", args[0])
		return exitUsage
	}
	return cmd.run(ctx, env, args[1:])
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "relay %s: transactional outbox (PostgreSQL) -> Delta Lake topic tables, exactly once, in commit order\n\n", Version)
	fmt.Fprintln(w, "Usage: relay <command> [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun `relay <command> --help` for a command's flags.")
	fmt.Fprintln(w, "Environment: DELTABUS_SOURCE (PostgreSQL DSN; keep the password in PGPASSWORD or ~/.pgpass / PGPASSFILE),")
	fmt.Fprintln(w, "DELTABUS_STORE (file:///path or s3://bucket/prefix), DELTABUS_SLOT, DELTABUS_PUBLICATION,")
	fmt.Fprintln(w, "DELTABUS_S3_ENDPOINT, DELTABUS_S3_PATH_STYLE, AWS_* credentials;")
	fmt.Fprintln(w, "DELTABUS_UNITY_CATALOG, _CATALOG, _SCHEMA and _TOKEN: relay run registers new topics in Unity Catalog;")
	fmt.Fprintln(w, "DELTABUS_PII_SCHEMAS, DELTABUS_KEK, DELTABUS_KEYS for personal data (docs/personal-data.md);")
	fmt.Fprintln(w, "OTEL_EXPORTER_OTLP_ENDPOINT and the other standard OTEL_* variables export traces and metrics by OTLP/HTTP.")
}

func cmdVersion(_ context.Context, env *cliEnv, _ []string) int {
	fmt.Fprintf(env.stdout, "relay %s\n", Version)
	return exitOK
}

// newFlagSet returns a flag set whose errors and help go to env.stderr.
func newFlagSet(env *cliEnv, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.stderr, "Usage: relay %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses flags into fs (flags and positional arguments in any
// order, no positional argument allowed), then runs after (environment
// defaults). -h maps to exit 0, errors to exitUsage.
func parseFlags(fs *flag.FlagSet, args []string, after ...func()) (code int, ok bool) {
	pos, code, ok := parseArgs(fs, args, after...)
	if ok && len(pos) > 0 {
		fmt.Fprintf(fs.Output(), "relay %s: unexpected argument %q\n", fs.Name(), pos[0])
		return exitUsage, false
	}
	return code, ok
}

// parseArgs parses flags and positional arguments in any order (so
// `relay inspect URL --json` works) into fs and returns the positional
// arguments, then runs after.
func parseArgs(fs *flag.FlagSet, args []string, after ...func()) (pos []string, code int, ok bool) {
	defer func() {
		if ok {
			for _, f := range after {
				f()
			}
		}
	}()
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK, false
			}
			return nil, exitUsage, false
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, 0, true
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), 0, true
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// fail prints one line, "relay: <what is wrong and how to fix it>", with
// any password redacted, and returns the exit code.
func fail(env *cliEnv, code int, err error) int {
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
	msg = strings.TrimPrefix(msg, "relay: ")
	fmt.Fprintf(env.stderr, "relay: %s\n", pgsource.Redact(msg))
	return code
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q is invalid: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q is invalid: use text or json", format)
}
