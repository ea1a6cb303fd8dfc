#!/usr/bin/env bash
# The README's test command (make test). Installs what is missing, starts one
# versitygw S3 server and one local-kms KMS server on 127.0.0.1 for the whole
# run, runs go vet and every test on PostgreSQL 15, then the core end-to-end
# tests on every other supported major (PG_MATRIX), prints a summary of each
# (with each failing test's own output), and stops what it started. Each
# test binary starts its own throwaway PostgreSQL (wal_level=logical; see
# tests/pgtest): replication slot names are cluster-wide, so packages
# running in parallel must not share a cluster. Extra arguments go to the
# full suite's `go test`; DELTABUS_PG_MATRIX="" skips the other majors.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/deps.sh
source scripts/services.sh
ensure_postgres
ensure_pgversions
ensure_versitygw
ensure_localkms
ensure_duckdb
ensure_typescript
ensure_chromium
ensure_promtool
export DELTABUS_PG_ROOT=$PG_ROOT # where pgcluster finds the other majors
# Files tests keep for people to look at (the operator page's screenshot).
export DELTABUS_TEST_ARTIFACTS=${DELTABUS_TEST_ARTIFACTS:-$(mktemp -d /tmp/deltabus-artifacts.XXXXXX)}

start_versitygw
start_localkms
# Tests that need a KMS fail rather than skip under make test.
export DELTABUS_REQUIRE_KMS=1
trap stop_services EXIT

echo "== go vet"
go vet ./...

LOG=$(mktemp /tmp/deltabus-test.XXXXXX.log)
go build -o "$SERVICES_DIR/testsummary" ./tests/testsummary
# The deploy module (compose file, Kubernetes manifests, roles) builds its
# own heavy dependencies: it runs beside the main suite, whose end-to-end
# tests spend most of their time waiting on injected faults.
(cd deploy && go vet ./... >"$LOG.deploy.vet" 2>&1 && go test -count=1 -timeout 15m -json ./... >"$LOG.deploy.json" 2>&1; echo $? >"$LOG.deploy.rc") &
deploy_pid=$!
echo "== go test (a PostgreSQL per test binary, S3 at ${DELTABUS_TEST_S3##*@}; full output in $LOG)"
set +e
go test -count=1 -parallel 4 -timeout 18m -json "${@:-./...}" 2>&1 | "$SERVICES_DIR/testsummary" -log "$LOG"
status=${PIPESTATUS[1]}
wait "$deploy_pid"
echo "== deploy: compose file, Kubernetes manifests and roles (module deploy/)"
if [ -f "$LOG.deploy.json" ]; then
  "$SERVICES_DIR/testsummary" -log "$LOG.deploy" <"$LOG.deploy.json" || status=1
else
  echo "go vet failed in deploy/:"; cat "$LOG.deploy.vet"
fi
[ "$(cat "$LOG.deploy.rc" 2>/dev/null)" = 0 ] || status=1

# The core end-to-end tests on every other supported major, at the full
# suite's size (about a minute a major): SIGKILLed relays checked row by
# row against the source, the snapshot-to-stream seam under producers, an
# invalidated and a dropped slot, a failover to a lagging standby. Each
# major is one `go test` whose clusters all run it (DELTABUS_PG_MAJOR,
# tests/pgtest); -expect fails the run if a core test is renamed out of
# CORE_TESTS rather than run. The failover-slot test runs in the full suite,
# on every installed major from 17 on.
# A run of chosen packages (arguments) skips them unless DELTABUS_PG_MATRIX
# names majors.
PG_MATRIX=${DELTABUS_PG_MATRIX-14 16 17 18}
[ $# = 0 ] || PG_MATRIX=${DELTABUS_PG_MATRIX-}
CORE_TESTS="TestCrashExactlyOnceLocal TestInvalidatedSlotRefusesAndRecovers TestSeamUnderConcurrentProducers TestLostSlotRecovery TestFailoverToLaggingStandby"
core_run="^($(echo $CORE_TESTS | tr ' ' '|'))\$"
for major in $PG_MATRIX; do
  echo "== core tests on PostgreSQL $major (full output in $LOG.pg$major)"
  DELTABUS_PG_MAJOR=$major go test -count=1 -timeout 10m -json -run "$core_run" ./tests/e2e ./bootstrap 2>&1 |
    "$SERVICES_DIR/testsummary" -log "$LOG.pg$major" -label "PostgreSQL $major" -expect "$(echo $CORE_TESTS | tr ' ' ',')" || status=1
done
set -e
echo "== test artifacts (the operator page's screenshot): $DELTABUS_TEST_ARTIFACTS"
if [ "$status" = 0 ]; then
  echo "== short fuzz runs"
  FUZZTIME=${FUZZTIME:-5s} bash scripts/fuzz.sh || status=$?
fi
exit "$status"
