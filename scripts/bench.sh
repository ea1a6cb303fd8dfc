#!/usr/bin/env bash
# make bench: the relay's side-by-side figures against this machine's own
# limit, one line per figure:
#   name relay=... reference=... ratio=...
# then the figures that need an S3 server, a bootstrap or the sink alone:
# end-to-end latency and many sources into shared topics on versitygw
# (relay bench --only fanin; on local disk it is part of relay bench), S3 requests and their cost per topic
# (BenchmarkTopicCost) and of 100 topics in a topic group (BenchmarkGroupCost), a 40-topic bootstrap against COPY (FORMAT binary)
# (BenchmarkBootstrap), memory with many topics (BenchmarkManyTopics) and consumer group members over HTTP
# (BenchmarkMembers).
#
# Every figure is also kept in machine-readable form in
# $DELTABUS_BENCH_RESULTS (default bin/bench-results): relay bench's JSON
# (relay.json, latency_s3*.json) and the Go benchmarks' output (*.txt);
# bench/charts then draws them as SVG into $DELTABUS_BENCH_CHARTS (default
# docs/img), which docs/benchmarks.md shows.
#
# Arguments go to `relay bench` (e.g. --events 200000 --rounds 1 for a
# shorter run); with --only among them only relay bench runs.
# DELTABUS_BENCH_EXTRA_ONLY=1 runs only the second part. DELTABUS_COST_SECONDS
# (default 10; 30 for the group cells) and DELTABUS_BENCH_ROWS (default 1000000) size it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
ensure_postgres
# The binary users run (make build, the Dockerfile): static and stripped.
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/relay ./cmd/relay
results=${DELTABUS_BENCH_RESULTS:-bin/bench-results}
charts=${DELTABUS_BENCH_CHARTS:-docs/img}
mkdir -p "$results"
draw() {
  echo "# charts from $results into $charts"
  go run ./bench/charts -results "$results" -out "$charts"
}
only=
for a in "$@"; do
  case $a in --only | --only=*) only=1 ;; esac
done
if [ -z "${DELTABUS_BENCH_EXTRA_ONLY:-}" ]; then
  rm -f "$results"/*.json "$results"/*.txt
  ./bin/relay bench --json "$results/relay.json" "$@"
  if [ -n "$only" ]; then
    draw
    exit 0
  fi
fi

echo "# latency on local disk with the five topics in one topic group (one commit of one table per batch), 60 s"
./bin/relay bench --only latency --latency-group --latency-name latency_group --json "$results/latency_group.json"

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
    ./bin/relay bench --only latency --latency-for 30s --latency-name "latency_$name" --json "$results/latency_$name.json" "$@"
}
# watch DIR: with the versitygw started here, its posix backend keeps
# s3://bench/DIR as files, where the latency run times each commit the
# moment it appears; an outside server's folder is unknown (no flag: the
# run takes the commitInfo timestamp, a PUT early).
watch() {
  if [ -n "${VERSITYGW_PID:-}" ]; then echo "--latency-watch=$SERVICES_DIR/s3/data/bench/$1"; fi
}
echo "# latency on S3 (versitygw on ${s3#*@}), 30 s, commit pacing at its S3 default (1 s) and off"
s3bench s3 --latency-store s3://bench/paced $(watch paced)
s3bench s3_unpaced --latency-store s3://bench/unpaced $(watch unpaced) --relay-args "--topic-commit-interval -1s"
echo "# many sources into five shared topics on S3 (2 and 4 PostgreSQL clusters, versitygw)"
AWS_ACCESS_KEY_ID=${creds%%:*} AWS_SECRET_ACCESS_KEY=${creds#*:} AWS_REGION=us-east-1 \
  DELTABUS_S3_ENDPOINT="http://${s3#*@}" DELTABUS_S3_PATH_STYLE=true \
  ./bin/relay bench --only fanin --fanin-name fanin_s3 --fanin-store s3://bench/fanin --json "$results/fanin_s3.json"

# gobench FILE, then go test arguments: the benchmark lines, kept in FILE.
gobench() {
  local file=$results/$1
  shift
  go test -count=1 -run '^$' -benchtime 1x "$@" >"$file.out" || { cat "$file.out"; return 1; }
  grep -E '^(Benchmark|goos|goarch|pkg|cpu)' "$file.out" >"$file"
  rm -f "$file.out"
  grep '^Benchmark' "$file"
}
echo "# S3 requests and their monthly cost per topic, p50/p99 latency (BenchmarkTopicCost, 10 s per cell)"
DELTABUS_COST_SECONDS=${DELTABUS_COST_SECONDS:-10} gobench topic_cost.txt -bench BenchmarkTopicCost -timeout 20m ./relay
# A group commits about once per interval: 30 s per cell, not 10, for more than a handful of commits.
echo "# S3 requests of 100 topics at 1 event/s each, all figures for the 100 together: in one topic group (commit interval"
echo "# the S3 default 1 s, 900ms, 2s) and, for reference, each in a table of its own (BenchmarkGroupCost, 30 s per cell)"
DELTABUS_COST_SECONDS=${DELTABUS_COST_SECONDS:-30} gobench group_cost.txt -bench BenchmarkGroupCost -timeout 20m ./relay

echo "# bootstrap of 1M rows over 40 topics against COPY (SELECT * FROM outbox) TO STDOUT (FORMAT binary)"
DELTABUS_BENCH_TOPICS=40 DELTABUS_BENCH_ROWS=${DELTABUS_BENCH_ROWS:-1000000} gobench bootstrap.txt \
  -bench 'BenchmarkBootstrap$' -benchtime 3x -timeout 20m ./bootstrap

echo "# consumer group members with a 5 ms handler: events/s with 1, 2, 4, 8 members over HTTP (relay serve) and with the Go SDK,"
echo "# goal 0.8 x members x 200 ev/s; CPU per event of relay serve against relay consume; memory with 10,000 in flight over 100,000 keys"
gobench members.txt -bench 'BenchmarkMembers$' -timeout 20m ./subscribe/serve

echo "# memory of one batch over many topics, local disk (BenchmarkManyTopics)"
gobench many_topics.txt -bench 'BenchmarkManyTopics/.*/local' -timeout 20m ./sink/deltasink

draw
