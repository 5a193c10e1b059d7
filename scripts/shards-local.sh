#!/usr/bin/env bash
# An entropy-lens experiment over the devices of one machine: one shard per device, all at once,
# then the merge into OUT/all.
#
#   EL_DEVICES="cuda:0 cuda:1 cuda:2 cuda:3" scripts/shards-local.sh OUT EXPERIMENT [ARGS...]
#
# EL_DEVICES: one device per shard (default "cpu cpu": two processes on the CPU; shards merge only
# when they ran on the same device kind); ARGS must not hold --device. ENTROPY_LENS: the binary
# (default: entropy-lens on the PATH). When a shard fails, the others still run to their end; run
# the same command again: the finished shards find their items done, the failed one resumes.
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,11p' "$0" >&2
  exit 2
fi
out=$1
shift
read -r -a devices <<< "${EL_DEVICES:-cpu cpu}"
n=${#devices[@]}
pids=()
for i in $(seq 1 "$n"); do
  "${ENTROPY_LENS:-entropy-lens}" experiment "$@" --device "${devices[i - 1]}" \
      --shard "$i/$n" --out "$out/shard-$i" &
  pids+=($!)
done
failed=()
for i in $(seq 1 "$n"); do
  wait "${pids[i - 1]}" || failed+=("$i/$n")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "shard(s) ${failed[*]} failed (see above); run the same command again to resume them" >&2
  exit 1
fi
"${ENTROPY_LENS:-entropy-lens}" merge "$out"/shard-* --out "$out/all"
