#!/usr/bin/env bash
# Functions to start and stop the throwaway services tests use. Sourced.
PG_BIN=${DELTABUS_PG_BIN:-/usr/lib/postgresql/15/bin}
SERVICES_DIR=""

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }

as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

start_postgres() {
  if [ -n "${DELTABUS_TEST_PG:-}" ]; then return; fi
  SERVICES_DIR=${SERVICES_DIR:-$(mktemp -d /tmp/deltabus-services.XXXXXX)}
  chmod 755 "$SERVICES_DIR" # the postgres user must reach its data dir
  local dir="$SERVICES_DIR/pg" port
  mkdir -p "$dir"; [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
  port=$(free_port)
  as_postgres "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-sync --no-instructions >/dev/null
  cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
wal_level = logical
max_replication_slots = 200
max_wal_senders = 200
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 256MB
max_wal_size = 4GB
CONF
  as_postgres "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/pg.log" -w -t 60 start >/dev/null
  export DELTABUS_TEST_PG="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  STARTED_PG="$dir/data"
}

start_versitygw() {
  if [ -n "${DELTABUS_TEST_S3:-}" ]; then return; fi
  SERVICES_DIR=${SERVICES_DIR:-$(mktemp -d /tmp/deltabus-services.XXXXXX)}
  local dir="$SERVICES_DIR/s3" port
  mkdir -p "$dir/data"
  port=$(free_port)
  "$DELTABUS_VERSITYGW" --access test --secret testsecret --port "127.0.0.1:$port" posix "$dir/data" >"$dir/versitygw.log" 2>&1 &
  VERSITYGW_PID=$!
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
    sleep 0.1
  done
  export DELTABUS_TEST_S3="http://test:testsecret@127.0.0.1:$port"
}

# local-kms takes only a port and listens on every interface; the tests
# reach it on 127.0.0.1. The seed is tests/kmstest.Seed (one AES key).
start_localkms() {
  if [ -n "${DELTABUS_TEST_KMS:-}" ]; then return; fi
  SERVICES_DIR=${SERVICES_DIR:-$(mktemp -d /tmp/deltabus-services.XXXXXX)}
  local dir="$SERVICES_DIR/kms" port
  mkdir -p "$dir"
  port=$(free_port)
  go run ./tests/kmstest/cmd/seed >"$dir/seed.yaml"
  PORT=$port KMS_SEED_PATH="$dir/seed.yaml" KMS_DATA_PATH="$dir/data" KMS_REGION=eu-west-2 KMS_ACCOUNT_ID=111122223333 \
    "$DELTABUS_LOCALKMS" >"$dir/local-kms.log" 2>&1 &
  LOCALKMS_PID=$!
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
    sleep 0.1
  done
  export DELTABUS_TEST_KMS="http://127.0.0.1:$port"
}

stop_services() {
  if [ -n "${STARTED_PG:-}" ]; then as_postgres "$PG_BIN/pg_ctl" -D "$STARTED_PG" -m immediate -w stop >/dev/null 2>&1 || true; fi
  if [ -n "${VERSITYGW_PID:-}" ]; then kill "$VERSITYGW_PID" 2>/dev/null || true; fi
  if [ -n "${LOCALKMS_PID:-}" ]; then kill "$LOCALKMS_PID" 2>/dev/null || true; fi
  if [ -n "$SERVICES_DIR" ]; then rm -rf "$SERVICES_DIR"; fi
}
