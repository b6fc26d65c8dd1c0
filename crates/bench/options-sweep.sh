#!/bin/bash
# The engine-options sweep of BENCHMARKS.md section 0d: for each variant, a fresh utxo
# database of ENTRIES entries, BATCHES batches, the run's summary line and the space
# amplification and disk use after it. Every variant ROUNDS times, in alternation.
#
# Usage: crates/bench/options-sweep.sh DIR [ENTRIES] [BATCHES] [ROUNDS]
# Needs release builds: cargo build --release -p sprig-bench -p sprig-cli
set -eu
dir=${1:?usage: options-sweep.sh DIR [ENTRIES] [BATCHES] [ROUNDS]}
entries=${2:-4000000}
batches=${3:-300}
rounds=${4:-2}
here=$(cd "$(dirname "$0")/../.." && pwd)
bench=$here/target/release/sprig-bench
cli=$here/target/release/sprig

# name | flags for create and run | flags for run only
variants=(
  "default||"
  "cache16||--cache-mb 16"
  "cache256||--cache-mb 256"
  "sync-never||--sprig-sync never"
  "retained1||--sprig-retained 1"
  "retained16||--sprig-retained 16"
  "posix||--sprig-io posix"
  "buffered||--direct-io false"
  "seg16|--sprig-segment-mb 16|"
  "seg256|--sprig-segment-mb 256|"
)

for round in $(seq "$rounds"); do
  for v in "${variants[@]}"; do
    IFS='|' read -r name both run_only <<<"$v"
    d=$dir/sweep-$name
    rm -rf "$d"
    # shellcheck disable=SC2086
    "$bench" create --workload utxo --entries "$entries" --dir "$d" $both >/dev/null
    # shellcheck disable=SC2086
    line=$("$bench" run --dir "$d" --batches "$batches" --quiet $both $run_only | grep -E '^ +sprig ')
    amp=$("$cli" --db "$d/sprig/db" --json stats | python3 -c '
import json, sys
s = json.load(sys.stdin)
print("%.2f %.0fMiB" % (s["space_amplification"], s["disk_bytes"] / 2**20))')
    echo "round $round | $name | $line | amp/disk $amp"
    rm -rf "$d"
  done
done
