#!/bin/bash
# Space use under retention (BENCHMARKS.md section 0d): utxo at 4M entries, 2,000 batches,
# retained versions 1, 4 and 16, two rounds in alternation; space amplification as the engine
# counts it at the end of the run, and as a read-only open with the default retention sees it.
# Usage: crates/bench/retention-space.sh DIR  (needs cargo build --release -p sprig-bench -p sprig-cli)
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:?usage: retention-space.sh DIR}
B=$here/target/release/sprig-bench; C=$here/target/release/sprig
for round in 1 2; do for rv in 1 4 16; do
  d=$dir/ret-$rv; rm -rf $d
  $B create --workload utxo --entries 4000000 --dir $d >/dev/null 2>&1
  out=$($B run --dir $d --batches 2000 --quiet --sprig-retained $rv)
  line=$(echo "$out" | grep -E '^ +sprig ')
  amp=$(echo "$out" | grep -o 'space amplification [^;]*')
  st=$($C --db $d/sprig/db --json stats | python3 -c '
import json,sys; s=json.load(sys.stdin)
print("reopened read-only: amp %.2f total %.2f disk %.0fMiB live %.0fMiB retained %.1fMiB files %.0fMiB" % (s["space_amplification"], s["total_space_amplification"], s["disk_bytes"]/2**20, s["live_bytes"]/2**20, s["retained_bytes"]/2**20, s["files_bytes"]/2**20))')
  echo "round $round | retained$rv | $line | in run: $amp | $st"
  rm -rf $d
done; done
