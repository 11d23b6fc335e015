#!/usr/bin/env bash
# Soak the simulator's property test: `scripts/soak.sh [N]` runs N checks
# (default 10000) of TestLockProperties from random seeds, in batches spread
# over the machine's cores, and prints every failing seed with its message.
# A batch stops at its first failure; the next batch goes on from a new seed.
# Replay a printed seed (rapid then shrinks it and prints the steps):
#   go test -run '^TestLockProperties$' -rapid.seed=SEED .
# Environment: SOAK_RUN (test regexp, default ^TestLockProperties$; e.g.
# ^TestElectionProperties$ for the election's properties),
# SOAK_PKG (its package, default .; e.g. ./sim for TestRedLockLivenessProperties),
# SOAK_BATCH (checks per batch, default 500), SOAK_JOBS (parallel batches,
# default the number of cores), SOAK_SHRINK (rapid's shrink time per failure,
# default 1s: the seed is what matters).
set -euo pipefail
cd "$(dirname "$0")/.."

total=${1:-10000}
if ! [[ "$total" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/soak.sh [N]   (N checks, a positive integer; got '$total')" >&2
  exit 2
fi
run=${SOAK_RUN:-'^TestLockProperties$'}
pkg=${SOAK_PKG:-.}
batch=${SOAK_BATCH:-500}
jobs=${SOAK_JOBS:-$(nproc)}
shrink=${SOAK_SHRINK:-1s}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/props.test" "$pkg"
if [ -z "$("$tmp/props.test" -test.list "$run")" ]; then
  echo "soak: no test of package $pkg matches $run (set SOAK_PKG for a test outside the root package)" >&2
  exit 2
fi

# worker W runs batches W, W+jobs, W+2*jobs, ... and appends "checks failures"
# to $tmp/count.W. It runs in $tmp, so the committed fail files (which CI
# replays) are not replayed by every batch.
worker() {
  local w=$1 checks=0 failures=0 b n seed out
  for ((b = w; b * batch < total; b += jobs)); do
    n=$((total - b * batch < batch ? total - b * batch : batch))
    seed=$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')
    if out=$(cd "$tmp" && ./props.test -test.run "$run" -test.count=1 -rapid.checks="$n" \
      -rapid.seed="$seed" -rapid.nofailfile -rapid.shrinktime="$shrink" 2>&1); then
      checks=$((checks + n))
      continue
    fi
    failures=$((failures + 1))
    local line after replay
    line=$(grep -m1 '\[rapid\] failed after' <<<"$out" || true)
    after=$(sed -n 's/.*failed after \([0-9]*\) tests.*/\1/p' <<<"$line")
    checks=$((checks + ${after:-0} + 1))
    replay=$(grep -o -m1 -- '-rapid.seed=[0-9]*' <<<"$out" || true)
    if [ -n "$replay" ]; then
      echo "FAIL $replay: ${line#*: }"
    else
      echo "FAIL in the batch from -rapid.seed=$seed (no seed printed):"
      tail -n 20 <<<"$out"
    fi
  done
  echo "$checks $failures" >"$tmp/count.$w"
}

start=$(date +%s)
for ((w = 0; w < jobs; w++)); do
  worker "$w" &
done
wait
checks=0 failures=0
for f in "$tmp"/count.*; do
  read -r c f2 <"$f"
  checks=$((checks + c)) failures=$((failures + f2))
done
secs=$(($(date +%s) - start))
echo "soak: $checks checks of $run in ${secs}s on $jobs jobs, $failures failing seed(s)"
[ "$failures" -eq 0 ]
