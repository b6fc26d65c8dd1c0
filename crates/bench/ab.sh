#!/bin/bash
# Alternate two sprig-bench binaries (OLD and NEW) on fresh databases, ROUNDS times: utxo at 4M
# entries (64 MiB cache, 300 batches) and transfer at 2^20 (512 MiB cache, 8 batches). Prints
# ops/s, commit CPU ms per batch and peak RSS MiB per run, then each binary's medians.
# Alternating in one session is how a change's before/after is measured here (the disk's speed
# drifts over minutes).
#
# usage: crates/bench/ab.sh OLD_BINARY NEW_BINARY ROUNDS [SCRATCH_DIR]
set -euo pipefail
old=$1; new=$2; rounds=$3; dir=${4:-$(mktemp -d)}
mkdir -p "$dir"
rm -f "$dir/ab-rounds.txt"
# The result row's figures by position; binaries since d8522b3 print a "batch max ms" column
# before "commit CPU ms".
row() { awk '/engine/ { shift = ($0 ~ /batch max ms/) ? 1 : 0 }
             /^ +sprig/ { print $2, "cpu", $(11 + shift), "rss", $(NF - 1) }'; }
for r in $(seq 1 "$rounds"); do
  for b in old new; do
    bin=$old; [ "$b" = new ] && bin=$new
    rm -rf "$dir/u4" "$dir/t20"
    "$bin" create --workload utxo --entries 4000000 --dir "$dir/u4" >/dev/null 2>&1
    u=$("$bin" run --dir "$dir/u4" --batches 300 --cache-mb 64 2>&1 | row)
    "$bin" create --workload transfer --entries 1048576 --dir "$dir/t20" >/dev/null 2>&1
    t=$("$bin" run --dir "$dir/t20" --batches 8 --cache-mb 512 2>&1 | row)
    echo "round $r $b utxo $u transfer $t" | tee -a "$dir/ab-rounds.txt"
  done
done
rm -rf "$dir/u4" "$dir/t20"
# Medians per binary of each figure (fields of the round lines above).
median() { sort -n | awk '{ a[NR] = $1 } END { print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
for b in old new; do
  line="median $b"
  for f in "utxo 5" "cpu 7" "rss 9" "transfer 11" "cpu 13" "rss 15"; do
    set -- $f
    line="$line $1 $(grep " $b utxo " "$dir/ab-rounds.txt" | awk -v n="$2" '{ print $n }' | median)"
  done
  echo "$line"
done
rm -f "$dir/ab-rounds.txt"
