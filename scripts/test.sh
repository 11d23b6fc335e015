#!/usr/bin/env bash
# The test command of holdfast (CONTRIBUTING.md "Running the tests"; .ci/run calls it).
# Installs redis-server when it is missing, then runs every test with the race
# detector. Extra arguments go to `go test` (e.g. -run, -short, -v).
set -euo pipefail
cd "$(dirname "$0")/.."

# redis-server brings redis-tools (redis-cli, which builds the test cluster);
# Sentinels run as `redis-server --sentinel`, so no other package is needed.
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  echo "redis-server or redis-cli not found; installing the Debian packages redis-server and redis-tools" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "not root: install it yourself (sudo apt-get install -y redis-server) and run again" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq redis-server redis-tools >/dev/null
  # The package starts a system-wide server on 6379; the tests start their
  # own on free ports and do not need it.
  (service redis-server stop || true) >/dev/null 2>&1
fi

go vet ./...
# Every test with the race detector, but one: a real cluster keeping 10,000
# holds with a 3 s watchdog beside frozen replicas, which needs the CPU the
# race detector takes; it runs on its own right after, without it.
go test -race -count=1 -skip '^TestClusterRenewalsBesideFrozenReplicas$' "$@" ./...
go test -count=1 -run '^TestClusterRenewalsBesideFrozenReplicas$' "$@" ./internal/deploytest
# Allocation counts, which the race detector's own allocations would blur.
go test -count=1 -run 'AllocatesNothing$' "$@" ./lockactor
# The simulator's property tests once more: 10,000 schedules of the
# reentrant lock's (a hundred times rapid's default; about a minute on two
# cores, docs/simulation.md) and 1,000 of the fair and read-write locks',
# after the committed fail files under testdata/rapid/ that every run
# replays first; and 1,000 of the RedLock liveness property's (sim).
go test -count=1 -run '^TestLockProperties$' -rapid.checks=10000 "$@" .
go test -count=1 -run 'TestRWLockProperties' -rapid.checks=1000 "$@" .
go test -count=1 -run '^TestFairLockProperties$' -rapid.checks=1000 "$@" .
go test -count=1 -run '^TestFairLockPropertiesRedisson$' -rapid.checks=1000 "$@" .
go test -count=1 -run '^TestFairHandoffLiveness$' -rapid.checks=2000 "$@" .
go test -count=1 -run '^TestSemaphoreProperties$' -rapid.checks=2000 "$@" .
go test -count=1 -run '^TestSemaphorePropertiesRedisson$' -rapid.checks=2000 "$@" .
go test -count=1 -run '^TestLockPropertiesRedisson$' -rapid.checks=2000 "$@" .
go test -count=1 -run '^TestElectionProperties$' -rapid.checks=2000 "$@" .
go test -count=1 ./sim -run '^TestRedLockLivenessProperties$' -rapid.checks=1000 "$@"
