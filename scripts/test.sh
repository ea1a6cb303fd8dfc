#!/usr/bin/env bash
# The README's test command (make test). Installs what is missing, starts one
# versitygw S3 server on 127.0.0.1 for the whole run, runs go vet and every
# test, prints a summary, and stops what it started. Each test binary starts
# its own throwaway PostgreSQL (wal_level=logical; see tests/pgtest):
# replication slot names are cluster-wide, so packages running in parallel
# must not share a cluster. Extra arguments go to `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/deps.sh
source scripts/services.sh

start_versitygw
trap stop_services EXIT

echo "== go vet"
go vet ./...

echo "== go test (a PostgreSQL per test binary, S3 at ${DELTABUS_TEST_S3##*@})"
LOG=$(mktemp)
set +e
go test -count=1 -timeout 18m -v "${@:-./...}" >"$LOG" 2>&1
status=$?
set -e
grep -E '^(\s*--- (PASS|FAIL|SKIP)|ok |FAIL|panic:|\s+\S+_test\.go:[0-9]+:)' "$LOG" | grep -vE '^\s+--- PASS' | tail -n 400 || true
passed=$(grep -cE '^\s*--- PASS' "$LOG" || true)
failed=$(grep -cE '^\s*--- FAIL' "$LOG" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$LOG" || true)
if [ "$status" != 0 ]; then
  echo "== go test failed (exit $status); last lines:"; tail -n 60 "$LOG"
fi
if [ "$skipped" != 0 ]; then grep -E -A2 '^\s*--- SKIP' "$LOG" | head -40; fi
rm -f "$LOG"
if [ "$status" = 0 ]; then
  echo "== short fuzz runs"
  FUZZTIME=${FUZZTIME:-5s} bash scripts/fuzz.sh || status=$?
fi
echo "$passed passed, $failed failed, $skipped skipped"
exit "$status"
