package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/usererr"
)

// The JSON Schema drafts of `relay contract`: --draft on register and
// compat, and show, which says the draft each version is read in.

// draftFlagUsage is the --draft flag's help.
const draftFlagUsage = "JSON Schema draft of a schema without $schema: draft-07 (the default, as Confluent Schema Registry reads one), 2020-12, 2019-09, draft-06 or draft-04; a schema whose $schema names another draft is refused"

func parseDraftFlag(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	d, err := contract.ParseDraft(s)
	if err != nil {
		return "", usererr.New(err, "--draft: %v", err)
	}
	return d, nil
}

func legacyNote(legacy bool) string {
	if legacy {
		return " (registered without $schema before draft-07, as Confluent Schema Registry reads one, became the default)"
	}
	return ""
}

// draftText says which draft a version is read in, and why.
func draftText(draft string, declared, legacy, asked bool) string {
	name := "JSON Schema " + contract.DraftName(draft)
	switch {
	case legacy:
		return name + ": registered without $schema before draft-07 became the default"
	case declared:
		return name + ", as its $schema says"
	case asked:
		return name + ", as --draft asked"
	}
	return name + ", the default for a schema without $schema"
}

// showReport is `relay contract show --json`.
type showReport struct {
	Topic    string          `json:"topic"`
	Type     string          `json:"type"`
	Version  int32           `json:"version"`
	Draft    string          `json:"draft"`     // the $schema URI of the draft it is read in
	Name     string          `json:"draftName"` // "draft-07", "2020-12"...
	Legacy   bool            `json:"legacy"`    // no $schema: registered before draft-07 was the default
	Schema   json.RawMessage `json:"schema"`
	Readable string          `json:"readAs"`
}

func cmdContractShow(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "contract show", "--topic T --type TY [--version N] [--json]")
	var rf registryFlags
	rf.register(fs, true)
	topic := fs.String("topic", "", "topic")
	typ := fs.String("type", "", "event type")
	version := fs.String("version", "", "version (default: the latest)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *topic == "" || *typ == "" {
		return fail(env, exitUsage, errors.New("--topic and --type are required, e.g. relay contract show --topic orders --type OrderPlaced"))
	}
	var v int32
	if *version != "" {
		var err error
		if v, err = contract.ParseVersion(*version); err != nil {
			return fail(env, exitUsage, err)
		}
	}
	reg, _, err := rf.open(ctx, env, nil)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	s, err := reg.Contract(ctx, *topic, *typ, v)
	if err != nil {
		return contractFail(env, err)
	}
	how := draftText(s.Draft, s.Declared, s.Legacy, false)
	if s.Legacy {
		how += "; schemas registered without $schema now are read as draft-07 (as Confluent Schema Registry reads them) unless registered with --draft 2020-12"
	}
	if rf.asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(showReport{Topic: s.Topic, Type: s.Type, Version: s.Version, Draft: s.Draft, Name: contract.DraftName(s.Draft),
			Legacy: s.Legacy, Schema: s.Raw(), Readable: how})
		return exitOK
	}
	b := s.Raw()
	_, _ = env.stdout.Write(b)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		fmt.Fprintln(env.stdout)
	}
	// The schema alone on stdout (a file to keep); how it is read beside it.
	fmt.Fprintf(env.stderr, "%s/%s v%d: %s\n", s.Topic, s.Type, s.Version, how)
	return exitOK
}
