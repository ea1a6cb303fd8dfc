#!/usr/bin/env bash
# Installs what DeltaBus tests and the demo need, if missing: PostgreSQL 15
# server binaries (apt), the versitygw S3 server (go install, cached) and the
# DuckDB node package used as an independent Delta reader (npm, cached).
# Idempotent; prints what it does.
set -euo pipefail

PG_BIN=${DELTABUS_PG_BIN:-/usr/lib/postgresql/15/bin}
CACHE=${DELTABUS_CACHE:-$HOME/.cache/deltabus}
VERSITYGW_VERSION=v1.8.0

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

ensure_postgres() {
  if [ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/pg_recvlogical" ]; then return; fi
  echo "deps: installing PostgreSQL 15 server (apt)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq postgresql-15 postgresql-client-15 >/dev/null
  # The package may start a system cluster; tests run their own.
  as_root pg_ctlcluster 15 main stop >/dev/null 2>&1 || true
}

ensure_versitygw() {
  export DELTABUS_VERSITYGW=${DELTABUS_VERSITYGW:-$CACHE/bin/versitygw}
  if [ -x "$DELTABUS_VERSITYGW" ]; then return; fi
  echo "deps: building versitygw $VERSITYGW_VERSION (go install, first time only, ~3 min)"
  mkdir -p "$CACHE/bin"
  GOBIN="$CACHE/bin" go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
}

ensure_duckdb() {
  if [ -n "${DELTABUS_SKIP_DUCKDB:-}" ]; then return; fi
  if [ -x scripts/install-duckdb.sh ]; then scripts/install-duckdb.sh; fi
}

ensure_postgres
ensure_versitygw
ensure_duckdb
