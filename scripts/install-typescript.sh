#!/bin/sh
# install-typescript.sh installs the TypeScript compiler that the tests use
# to build examples/members/consumer.ts, into a cache directory outside the
# repository. Idempotent: when the pinned version is installed it does
# nothing and needs no network.
#
#   DELTABUS_TYPESCRIPT_DIR  install prefix (default $HOME/.cache/deltabus/typescript)
#   TYPESCRIPT_VERSION       package version (default 5.6.3)
set -eu

dir="${DELTABUS_TYPESCRIPT_DIR:-${HOME}/.cache/deltabus/typescript}"
version="${TYPESCRIPT_VERSION:-5.6.3}"
pkg="$dir/node_modules/typescript/package.json"

command -v node >/dev/null 2>&1 || { echo "install-typescript: node is not installed" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "install-typescript: npm is not installed" >&2; exit 1; }

if [ -f "$pkg" ] && node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' "$pkg" "$version"; then
  exit 0
fi

mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"name":"deltabus-typescript-cache","private":true}' > "$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --save-exact "typescript@$version" "@types/node@20"
echo "install-typescript: typescript@$version in $dir"
