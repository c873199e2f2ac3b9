#!/usr/bin/env bash
# Model-checks the pool's lease-ending protocol (docs/model/pool-protocol.pml) with Spin.
#
# usage: scripts/check-pool-model.sh [WORKDIR]
#
# Generates the verifier with `spin -a`, compiles it and runs an exhaustive search for
# assertion violations and invalid end states; prints Spin's summary. Exit 0 when the
# search completes with "errors: 0", 1 on any error, 77 (meson's "skipped") when spin or
# cc is missing (scripts/deps.sh spin installs it). -h or --help prints this.
set -euo pipefail

case "${1:-}" in
-h | --help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
model=$here/../docs/model/pool-protocol.pml
for tool in spin cc; do
    if ! command -v "$tool" >/dev/null; then
        echo "check-pool-model: $tool not found (scripts/deps.sh spin): skipped" >&2
        exit 77
    fi
done
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/pool-model.XXXXXX")}
mkdir -p "$work"
cd "$work"
spin -a "$model" >/dev/null
cc -O2 -DSAFETY -o pan pan.c
./pan -m1000000 >pan.out 2>&1 || true
grep -E "errors:|states, stored|depth reached|Search not completed" pan.out
if grep -q "errors: 0" pan.out && ! grep -q "Search not completed" pan.out; then
    exit 0
fi
cat pan.out >&2
exit 1
