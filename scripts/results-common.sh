# Sourced by scripts/results.sh (the paper's experiments) and scripts/results-tuned-lens.sh (the same
# tables through a tuned lens): the build, the models, the data, and the timed, resumable steps.
# Expects OUT (the RUNS_DIR) to be set (and ENTROPY_LENS_BIN, optionally: a binary to run instead of
# building this checkout's); defines EL, SMOL, GEMMA, STORIES, MMLU, TIMES, TUNED_LENS_STEPS,
# timed, run and print_timings.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/entropy-lens/target}"
STORIES="${TINYSTORIES:-data/tinystories/valid.jsonl}"
MMLU="${MMLU:-data/mmlu/test.jsonl}"
# ENTROPY_LENS_BIN: run with that binary instead of building this checkout's.
BUILT="${ENTROPY_LENS_BIN:-$CARGO_TARGET_DIR/release/entropy-lens}"
[ -n "${ENTROPY_LENS_BIN:-}" ] || cargo build --release --quiet
# A copy, so that rebuilding during the hours this takes does not change the binary mid-way.
EL="$OUT/.entropy-lens"
mkdir -p "$OUT"
cp "$BUILT" "$EL.new" && mv "$EL.new" "$EL"
# Which build ran which steps (a resumed run may continue with a newer one).
printf '%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  "$(git describe --always --dirty 2>/dev/null || echo unknown)" "$(sha256sum "$EL" | cut -c1-16)" >>"$OUT/binaries.tsv"
"$EL" fetch-models >/dev/null
M="${ENTROPY_LENS_MODELS:-$HOME/.cache/entropy-lens/models}"
SMOL="$M/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA="$M/gemma-3-270m-q4_k_m.gguf"
TIMES="$OUT/timings.tsv"
# Runs "$@" and appends its wall time under the name $1, also when it fails or is interrupted
# (Ctrl-C, TERM); only a SIGKILL of the script loses the time of the step it was in. Started in the
# background (`&`, nohup), the script ignores SIGINT: stop it with `kill -TERM -<its process group>`.
timed() {
  local name="$1" t0 rc=0
  shift
  if [ -n "${STEPS:-}" ] && ! [[ "$name" =~ $STEPS ]]; then
    echo "==> skipping $name (STEPS=$STEPS)"
    return 0
  fi
  t0=$(date +%s)
  log_time() { printf '%s\t%s\t%s\t%s\n' "$name" "$(($(date +%s) - t0))" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$1" >>"$TIMES"; }
  trap 'log_time interrupted; exit 130' INT TERM
  echo "==> $name: ${*:2}"
  "$@" || rc=$?
  trap - INT TERM
  if [ "$rc" -eq 0 ]; then log_time done; else log_time "failed ($rc)"; fi
  return "$rc"
}
# One experiment, named by its output folder (the last argument).
run() {
  timed "$(basename "${*: -1}")" "$EL" experiment "$@"
}
# The steps of results-tuned-lens.sh, by name; every other step is results.sh's.
TUNED_LENS_STEPS='^lens-|-tuned-'
# The sums of timings.tsv for one script's steps ($1: paper or tuned-lens; a RUNS_DIR may hold both
# scripts' steps), and their total; lines marked as repeats (a step run again only to time it) left out.
print_timings() {
  echo "==> wall time per step of the $1 part (seconds, summed over resumes; $TIMES)"
  if [ ! -f "$TIMES" ]; then
    echo "(no step timed yet)"
    return 0
  fi
  awk -F'\t' -v part="$1" -v tuned="$TUNED_LENS_STEPS" '$4 !~ /^repeat/ && ($1 ~ tuned) == (part == "tuned-lens") {
    s[$1] += $2; if (!($1 in o)) o[$1] = n++ } END {
    for (k in o) order[o[k]] = k
    for (i = 0; i < n; i++) { printf "%-52s %8d\n", order[i], s[order[i]]; t += s[order[i]] }
    printf "%-52s %8d (%.2f h)\n", "total", t, t / 3600 }' "$TIMES"
}
