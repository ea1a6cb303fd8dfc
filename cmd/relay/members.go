package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe/members"
)

// cmdMembers is `relay members list|protect|unprotect`: the store's
// groups served to parallel members (relay serve), and their protection
// against retention.
func cmdMembers(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "protect" && args[0] != "unprotect" && args[0] != "upcast") {
		fmt.Fprintln(env.stderr, "relay members: want `relay members list`, `relay members protect --group G --topic T --max-hold 168h`, "+
			"`relay members unprotect --group G --topic T` or `relay members upcast --topic T --type X --from N --patch FILE`")
		return exitUsage
	}
	sub := args[0]
	fs := newFlagSet(env, "members "+sub, "[--group G --topic T] [--max-hold D]")
	storeURL := fs.String("store", env.getenv("DELTABUS_STORE"), "store URL: file:///path or s3://bucket/prefix (env DELTABUS_STORE)")
	group := fs.String("group", "", "consumer group")
	topic := fs.String("topic", "", "topic")
	typ := fs.String("type", "", "upcast: the event type")
	from := fs.Int("from", 0, "upcast: the version the patch turns into the next")
	patch := fs.String("patch", "", "upcast: a file holding a JSON Patch (RFC 6902) from version --from to --from+1")
	maxHold := fs.Duration("max-hold", 7*24*time.Hour, "protect: keep what the group has not acknowledged up to this long past the table's retention; then release it with an alert")
	if code, ok := parseFlags(fs, args[1:]); !ok {
		return code
	}
	if sub == "upcast" && (*topic == "" || *typ == "" || *from < 1 || *patch == "") {
		return fail(env, exitUsage, errors.New("--topic, --type, --from and --patch are required, e.g. relay members upcast --topic orders --type OrderPlaced --from 1 --patch v1-to-v2.json"))
	}
	if sub != "list" && sub != "upcast" && (*group == "" || *topic == "") {
		return fail(env, exitUsage, errors.New("--group and --topic are required, e.g. relay members protect --group billing --topic orders --max-hold 168h"))
	}
	log := slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := daemon.OpenStore(ctx, *storeURL, storage.S3Options{Logger: log})
	if err != nil {
		return fail(env, exitUsage, err)
	}
	switch sub {
	case "protect":
		err = members.Protect(ctx, store, *group, *topic, *maxHold)
	case "unprotect":
		err = members.Unprotect(ctx, store, *group, *topic)
	case "upcast":
		var data []byte
		if data, err = os.ReadFile(*patch); err != nil {
			return fail(env, exitUsage, fmt.Errorf("--patch: %w", err))
		}
		err = members.SetUpcast(ctx, store, *topic, *typ, int32(*from), data)
	default:
		return listMembers(ctx, env, store)
	}
	var re *members.RequestError
	if errors.As(err, &re) {
		return fail(env, exitUsage, err)
	}
	if err != nil {
		return fail(env, exitFailure, err)
	}
	return exitOK
}

func listMembers(ctx context.Context, env *cliEnv, store storage.Store) int {
	list, err := members.List(ctx, store)
	if err != nil {
		return fail(env, exitFailure, err)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPOSITION\tIN FLIGHT\tUNACKED\tMEMBERS\tDELIVERED\tREDELIVERED\tACKED\tRETENTION")
	now := time.Now()
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d:%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", s.Group, s.Topic, s.Position.Version, s.Position.Offset,
			s.InFlight, s.Unacked, len(s.Members), s.Delivered, s.Redelivered, s.Acked, s.ProtectionText(now))
	}
	if err := tw.Flush(); err != nil {
		return fail(env, exitFailure, err)
	}
	return exitOK
}
