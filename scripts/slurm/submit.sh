#!/usr/bin/env bash
# Submits an entropy-lens experiment to Slurm as a job array of N shards plus a merge job that
# starts when every shard has succeeded; prints the two job ids.
#
#   scripts/slurm/submit.sh N OUT EXPERIMENT [ARGS...]
#   EL_SBATCH="--gres=gpu:1 --cpus-per-task=8 --time=04:00:00" \
#       scripts/slurm/submit.sh 8 runs/formats-llama formats --model meta-llama/Llama-3.2-1B-Instruct \
#       --device cuda --scale paper
#
# EL_SBATCH: extra sbatch options for the shards (GPUs, CPUs, time); an account or partition both
# jobs need goes in SBATCH_ACCOUNT / SBATCH_PARTITION, which sbatch reads itself.
# ENTROPY_LENS: the binary (default: entropy-lens on the PATH of the compute nodes).
# ARGS are split on spaces (no argument may contain one).
# After a failed or preempted shard: scancel the merge job (its dependency can no longer be met)
# and run the same command again from the same folder: finished shards find their items done and
# end at once, the others resume, then the merge runs.
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,17p' "$0" >&2
  exit 2
fi
n=$1 out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
export EL_SHARDS=$n EL_OUT=$out EL_ARGS="$*"
# shellcheck disable=SC2086  # EL_SBATCH is a list of options
shards=$(sbatch --parsable --array="1-$n" --export=ALL ${EL_SBATCH:-} "$here/shards.sbatch")
merge=$(sbatch --parsable --dependency="afterok:$shards" --export=ALL "$here/merge.sbatch")
echo "shards $shards, merge $merge: the result will be $out/all/result.json"
