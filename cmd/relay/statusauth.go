package main

import (
	"flag"
	"strconv"

	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/usererr"
)

// statusAuth is relay run's token for the operator's page, /api/status and
// /debug/pprof/ (daemon.HTTPOptions.Token): from --status-token-file
// (DELTABUS_STATUS_TOKEN_FILE) or DELTABUS_STATUS_TOKEN. The token itself
// has no flag, so it never shows in argv or in -help's defaults.
type statusAuth struct {
	file    string
	metrics bool
	token   string
}

func (a *statusAuth) register(fs *flag.FlagSet, env *cliEnv) {
	fs.StringVar(&a.file, "status-token-file", env.getenv("DELTABUS_STATUS_TOKEN_FILE"),
		"file holding the bearer token the operator's page (/), /api/status and /debug/pprof/ ask for (or the token itself in env DELTABUS_STATUS_TOKEN); /healthz and /readyz stay open (env DELTABUS_STATUS_TOKEN_FILE)")
	metricsDefault, _ := strconv.ParseBool(env.getenv("DELTABUS_METRICS_TOKEN"))
	fs.BoolVar(&a.metrics, "metrics-token", metricsDefault,
		"also ask /metrics for the status token (the scraper sends it: Prometheus's authorization.credentials_file) (env DELTABUS_METRICS_TOKEN)")
}

// load reads the token; every error is one line that never holds it.
func (a *statusAuth) load(env *cliEnv) error {
	tok, err := daemon.LoadToken(a.file, env.getenv("DELTABUS_STATUS_TOKEN"))
	if err != nil {
		return err
	}
	if a.metrics && tok == "" {
		return usererr.New(nil, "--metrics-token needs a status token: set --status-token-file (DELTABUS_STATUS_TOKEN_FILE) or DELTABUS_STATUS_TOKEN")
	}
	a.token = tok
	return nil
}
