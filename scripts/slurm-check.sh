#!/usr/bin/env bash
# The cluster recipes of docs/experiments.md, run for real: the Slurm one on a one-node Slurm
# cluster (this machine), and the one-machine one (one shard per device) as two CPU processes.
#
# Installs Debian's Slurm and Munge if missing, starts munged, slurmctld and slurmd with every
# state, spool, socket and log file in a temporary folder and every daemon on loopback, submits
# scripts/slurm/submit.sh (a job array of 3 shards of a smoke `formats` run and a merge job that
# depends on it), waits (bounded), compares the merged result with an unsharded run byte for byte,
# and stops everything it started. Exit 0 only when all of that holds.
#
#   scripts/slurm-check.sh          # as root: slurmd runs jobs as their user, so it runs as root
#
# Exit 0: passed. Exit 3: skipped, not root (scripts/test.sh says so and goes on). Note that on a
# machine booted with systemd, installing the packages may enable and start Debian's own munge and
# slurmctld services (with the package's configuration); this check does not use or stop them.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/entropy-lens/target}"
LIMIT=${SLURM_CHECK_LIMIT:-600}   # seconds for the jobs to finish

say() { printf '==> %s\n' "$*"; }

if [ "$(id -u)" != 0 ]; then
  echo "skipped: the Slurm check runs slurmd, which must run as root (run: sudo $0)" >&2
  exit 3
fi
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null \
   || ! command -v munged >/dev/null; then
  say "installing Debian's Slurm and Munge"
  env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      slurmctld slurmd slurm-client munge >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null \
         && env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
              slurmctld slurmd slurm-client munge >/dev/null; }
fi

say "building entropy-lens"
cargo build --release --quiet
BIN="$CARGO_TARGET_DIR/release/entropy-lens"
"$BIN" fetch-models >/dev/null
MODEL=$("$BIN" fetch-models | head -1)

T=$(mktemp -d /tmp/entropy-lens-slurm.XXXXXX)
chmod 700 "$T"
stop_all() {
  set +e
  if [ -f "$T/slurm.conf" ]; then
    SLURM_CONF="$T/slurm.conf" scontrol shutdown >/dev/null 2>&1
  fi
  for pidfile in "$T/slurmd.pid" "$T/slurmctld.pid" "$T/munged.pid"; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill "$pid" 2>/dev/null
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  # Job steps a killed slurmd may have left.
  pkill -9 -f "$T/" 2>/dev/null
  rm -rf "$T"
}
trap stop_all EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
NODE=$(hostname -s)
CPUS=$(nproc)
CTLD_PORT=$(free_port)
SLURMD_PORT=$(free_port)
mkdir -p "$T/state" "$T/spool" "$T/runs"

say "munged (key, socket and logs in $T)"
dd if=/dev/urandom of="$T/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge.key"
munged --force --key-file="$T/munge.key" --socket="$T/munge.socket" --pid-file="$T/munged.pid" \
    --log-file="$T/munged.log" --seed-file="$T/munged.seed"

cat >"$T/slurm.conf" <<EOF
ClusterName=entropylens
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
CommunicationParameters=NoInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/munge.socket
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MinJobAge=600
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=check Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$T/slurm.conf"

say "slurmctld and slurmd (one node: $NODE, $CPUS CPUs, ports $CTLD_PORT and $SLURMD_PORT on 127.0.0.1)"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N "$NODE"
for _ in $(seq 100); do
  state=$(sinfo -h -n "$NODE" -o %t 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "${state:-}" = idle ] || { echo "the node did not come up (state: ${state:-none})"; tail -20 "$T/slurmctld.log" "$T/slurmd.log"; exit 1; }

# The smoke experiment: 12 items in batches of 4, so each of the 3 shards holds one batch.
ARGS=(formats --model "$MODEL" --n 4 --tokens 8 --k 3 --folds 2 --batch 4)
say "submitting: scripts/slurm/submit.sh 3 $T/runs/sharded ${ARGS[*]}"
cd "$T/runs"
ENTROPY_LENS="$BIN" "$ROOT/scripts/slurm/submit.sh" 3 "$T/runs/sharded" "${ARGS[@]}" | tee "$T/submit.out"
merge_job=$(sed -n 's/.*merge \([0-9]*\):.*/\1/p' "$T/submit.out")

say "waiting for the merge job $merge_job (at most $LIMIT s)"
start=$(date +%s)
while :; do
  job_state=$(scontrol show job "$merge_job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  case "$job_state" in
    COMPLETED) break ;;
    FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE)
      echo "merge job $merge_job: $job_state"; tail -n 20 "$T/runs"/*.out; exit 1 ;;
  esac
  if [ $(( $(date +%s) - start )) -gt "$LIMIT" ]; then
    echo "timed out; the queue:"; squeue; tail -n 20 "$T/runs"/*.out "$T/slurmctld.log"; exit 1
  fi
  sleep 1
done
say "jobs done in $(( $(date +%s) - start )) s; the shards ran as array tasks:"
ls "$T/runs/sharded"

say "the unsharded run, for comparison"
"$BIN" experiment "${ARGS[@]}" --out "$T/runs/whole" >/dev/null
for f in result.json records.jsonl profiles.npy index.json; do
  cmp "$T/runs/whole/$f" "$T/runs/sharded/all/$f"
done
say "merged = unsharded, byte for byte (result.json, records.jsonl, profiles.npy, index.json)"

say "the one-machine recipe: EL_DEVICES=\"cpu cpu\" scripts/shards-local.sh (two processes at once)"
EL_DEVICES="cpu cpu" ENTROPY_LENS="$BIN" "$ROOT/scripts/shards-local.sh" "$T/runs/local" "${ARGS[@]}" >/dev/null
for f in result.json records.jsonl profiles.npy index.json; do
  cmp "$T/runs/whole/$f" "$T/runs/local/all/$f"
done
say "merged = unsharded, byte for byte"

stop_all
trap - EXIT
left=$(pgrep -f "entropy-lens-slurm\.|slurmctld -f|slurmd -f|munged --force" || true)
if [ -n "$left" ] || [ -e "$T" ]; then
  echo "left behind: processes [$left], folder $T"; exit 1
fi
say "Slurm check passed; every daemon stopped and $T removed"
