#!/usr/bin/env bash
# make bench: the relay's side-by-side figures against this machine's own
# limit, one line per figure:
#   name relay=... reference=... ratio=...
# then, on a full run (no arguments), the figures that need an S3 server or
# a bootstrap: end-to-end latency on versitygw, S3 requests and their cost
# per topic (BenchmarkTopicCost), and a 40-topic bootstrap against
# COPY (FORMAT binary) (BenchmarkBootstrap).
# Arguments go to `relay bench` alone (e.g. --only batch,latency --events 200000).
# DELTABUS_BENCH_EXTRA_ONLY=1 runs only the second part.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
ensure_postgres
go build -o bin/relay ./cmd/relay
if [ -z "${DELTABUS_BENCH_EXTRA_ONLY:-}" ]; then
  ./bin/relay bench "$@"
  [ $# -eq 0 ] || exit 0
fi

source scripts/services.sh
ensure_versitygw
start_versitygw
trap stop_services EXIT
# DELTABUS_TEST_S3 is http://KEY:SECRET@HOST:PORT; the posix backend's
# buckets are directories.
s3=${DELTABUS_TEST_S3#http://}
creds=${s3%@*}
mkdir -p "$SERVICES_DIR/s3/data/bench"
s3bench() { # name, then relay bench arguments
  local name=$1
  shift
  AWS_ACCESS_KEY_ID=${creds%%:*} AWS_SECRET_ACCESS_KEY=${creds#*:} AWS_REGION=us-east-1 \
    DELTABUS_S3_ENDPOINT="http://${s3#*@}" DELTABUS_S3_PATH_STYLE=true \
    ./bin/relay bench --only latency --latency-for 30s "$@" | sed -e "/^latency_/s/^latency_/latency_${name}_/"
}
echo "# latency on S3 (versitygw on ${s3#*@}), 30 s, commit pacing at its S3 default (1 s) and off"
s3bench s3 --latency-store s3://bench/paced
s3bench s3_unpaced --latency-store s3://bench/unpaced --relay-args "--topic-commit-interval -1s"

echo "# S3 requests and their monthly cost per topic, p50/p99 latency (BenchmarkTopicCost, 10 s per cell)"
DELTABUS_COST_SECONDS=${DELTABUS_COST_SECONDS:-10} go test -count=1 -run '^$' -bench BenchmarkTopicCost \
  -benchtime 1x -timeout 20m ./relay | grep '^Benchmark'

echo "# bootstrap of 1M rows over 40 topics against COPY (SELECT * FROM outbox) TO STDOUT (FORMAT binary)"
DELTABUS_BENCH_TOPICS=40 DELTABUS_BENCH_ROWS=${DELTABUS_BENCH_ROWS:-1000000} go test -count=1 -run '^$' \
  -bench 'BenchmarkBootstrap$' -benchtime 3x -timeout 20m ./bootstrap | grep '^Benchmark'
