#!/usr/bin/env bash
# make bench: the relay's side-by-side figures against this machine's own
# limit (pg_recvlogical on the same WAL), one line per figure:
#   name relay=... reference=... ratio=...
# Arguments go to `relay bench` (e.g. --only batch,latency --events 200000).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
go build -o bin/relay ./cmd/relay
./bin/relay bench "$@"
