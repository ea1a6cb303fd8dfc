package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/deltabus/deltabus/topicmeta"
	"github.com/deltabus/deltabus/unitycatalog"
	"github.com/deltabus/deltabus/usererr"
)

// The environment of Unity Catalog registration (relay catalog sync, and
// relay run when all three names are set).
const (
	envUC        = "DELTABUS_UNITY_CATALOG"
	envUCCatalog = "DELTABUS_UNITY_CATALOG_CATALOG"
	envUCSchema  = "DELTABUS_UNITY_CATALOG_SCHEMA"
	envUCToken   = "DELTABUS_UNITY_CATALOG_TOKEN"
)

func cmdCatalog(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] != "sync" {
		fmt.Fprintln(env.stderr, "relay catalog: want `relay catalog sync --unity-catalog URL --catalog C --schema S`")
		return exitUsage
	}
	fs := newFlagSet(env, "catalog sync", "--unity-catalog URL --catalog C --schema S [--store URL] [--replace=false] [--json]")
	storeURL := fs.String("store", "", "store URL: file:///path or s3://bucket/prefix (default from DELTABUS_STORE)")
	ucURL := fs.String("unity-catalog", "", "Unity Catalog server, e.g. https://uc.example.com (default from "+envUC+"); the bearer token comes from "+envUCToken)
	cat := fs.String("catalog", "", "catalog to register the topics in (a topic group's table once, as _group_<name>); created if missing (default from "+envUCCatalog+")")
	schema := fs.String("schema", "", "schema to register the topics in; created if missing (default from "+envUCSchema+")")
	replace := fs.Bool("replace", true, "bring a table whose description, columns or properties changed up to date by deleting and creating it again (the API has no update; in Databricks grants on the table itself are lost: grant on the schema); false only reports it")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	schemas := piiSchemasFlag(fs, env)
	if code, ok := parseFlags(fs, args[1:]); !ok {
		return code
	}
	if err := describePersonal(*schemas); err != nil {
		return fail(env, exitUsage, err)
	}
	*ucURL, *cat, *schema = cmp.Or(*ucURL, env.getenv(envUC)), cmp.Or(*cat, env.getenv(envUCCatalog)), cmp.Or(*schema, env.getenv(envUCSchema))
	if *ucURL == "" || *cat == "" || *schema == "" {
		return fail(env, exitUsage, usererr.New(nil, "want --unity-catalog URL, --catalog C and --schema S (or %s, %s and %s)", envUC, envUCCatalog, envUCSchema))
	}
	client, target, err := ucClient(*ucURL, *cat, *schema, env.getenv(envUCToken))
	if err != nil {
		return fail(env, exitUsage, usererr.New(err, "%v", err))
	}
	target.Replace = *replace
	store, code, ok := openStoreFlag(ctx, env, *storeURL)
	if !ok {
		return code
	}
	listing, err := topicmeta.LoadAll(ctx, store)
	if err != nil {
		return fail(env, exitFailure, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	rep, err := client.Sync(cctx, target, listing)
	if err != nil {
		return fail(env, exitFailure, fmt.Errorf("catalog sync to %s: %w", client, err))
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		printSync(env, target, rep)
	}
	if len(rep.Conflicts)+len(rep.Drifted) > 0 {
		return exitFailure
	}
	return exitOK
}

func ucClient(rawURL, cat, schema, token string) (*unitycatalog.Client, unitycatalog.Target, error) {
	t := unitycatalog.Target{Catalog: cat, Schema: schema, Version: Version}
	if err := unitycatalog.CheckName("catalog", cat); err != nil {
		return nil, t, err
	}
	if err := unitycatalog.CheckName("schema", schema); err != nil {
		return nil, t, err
	}
	c, err := unitycatalog.NewClient(rawURL, token, nil)
	return c, t, err
}

func printSync(env *cliEnv, t unitycatalog.Target, rep unitycatalog.Report) {
	full := func(n string) string { return t.Catalog + "." + t.Schema + "." + n }
	if rep.CatalogCreated {
		fmt.Fprintf(env.stdout, "created catalog %s\n", t.Catalog)
	}
	if rep.SchemaCreated {
		fmt.Fprintf(env.stdout, "created schema %s.%s\n", t.Catalog, t.Schema)
	}
	for _, n := range rep.Created {
		fmt.Fprintf(env.stdout, "created %s\n", full(n))
	}
	for _, n := range sortedKeys(rep.Replaced) {
		fmt.Fprintf(env.stdout, "replaced %s (%s changed)\n", full(n), rep.Replaced[n])
	}
	for _, n := range sortedKeys(rep.Drifted) {
		fmt.Fprintf(env.stdout, "differs %s (%s): run again with --replace to update it\n", full(n), rep.Drifted[n])
	}
	for _, n := range sortedKeys(rep.Conflicts) {
		fmt.Fprintf(env.stdout, "conflict %s: %s\n", full(n), rep.Conflicts[n])
	}
	for _, n := range sortedKeys(rep.Skipped) {
		fmt.Fprintf(env.stdout, "skipped %s: %s\n", n, rep.Skipped[n])
	}
	fmt.Fprintf(env.stdout, "%d created, %d replaced, %d unchanged, %d differing, %d conflicts, %d skipped\n",
		len(rep.Created), len(rep.Replaced), len(rep.Unchanged), len(rep.Drifted), len(rep.Conflicts), len(rep.Skipped))
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ucFromEnv returns the client relay run registers new topics with: nil
// when none of the three DELTABUS_UNITY_CATALOG* names is set, an error
// when only some are.
func ucFromEnv(env *cliEnv) (*unitycatalog.Client, unitycatalog.Target, error) {
	u, c, s := env.getenv(envUC), env.getenv(envUCCatalog), env.getenv(envUCSchema)
	if u == "" && c == "" && s == "" {
		return nil, unitycatalog.Target{}, nil
	}
	if u == "" || c == "" || s == "" {
		return nil, unitycatalog.Target{}, usererr.New(nil, "Unity Catalog registration needs all of %s, %s and %s (set: %s)", envUC, envUCCatalog, envUCSchema, setNames(env, envUC, envUCCatalog, envUCSchema))
	}
	client, target, err := ucClient(u, c, s, env.getenv(envUCToken))
	if err != nil {
		return nil, target, usererr.New(err, "%v", err)
	}
	return client, target, nil
}

func setNames(env *cliEnv, names ...string) string {
	var set []string
	for _, n := range names {
		if env.getenv(n) != "" {
			set = append(set, n)
		}
	}
	return strings.Join(set, ", ")
}
