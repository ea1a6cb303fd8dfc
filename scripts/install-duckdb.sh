#!/bin/sh
# install-duckdb.sh installs the DuckDB node client (@duckdb/node-api) that
# the independent-reader tests use to check our Delta tables, into a cache
# directory outside the repository. It is idempotent: when the pinned
# version is already installed it does nothing and needs no network.
#
#   DELTABUS_DUCKDB_DIR  install prefix (default $HOME/.cache/deltabus/duckdb)
#   DUCKDB_NODE_VERSION  package version (default 1.5.6-r.1)
set -eu

dir="${DELTABUS_DUCKDB_DIR:-${HOME}/.cache/deltabus/duckdb}"
version="${DUCKDB_NODE_VERSION:-1.5.6-r.1}"
pkg="$dir/node_modules/@duckdb/node-api/package.json"

command -v node >/dev/null 2>&1 || { echo "install-duckdb: node is not installed" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "install-duckdb: npm is not installed" >&2; exit 1; }

if [ -f "$pkg" ] && node -e '
  const v = require(process.argv[1]).version;
  process.exit(v === process.argv[2] ? 0 : 1);
' "$pkg" "$version"; then
  exit 0
fi

mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"name":"deltabus-duckdb-cache","private":true}' > "$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --save-exact "@duckdb/node-api@$version"
node -e 'require(process.argv[1])' "$dir/node_modules/@duckdb/node-api" \
  || { echo "install-duckdb: @duckdb/node-api@$version installed but does not load" >&2; exit 1; }
echo "install-duckdb: @duckdb/node-api@$version in $dir"
