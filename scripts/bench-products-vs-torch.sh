#!/usr/bin/env bash
# The decoder's and the lens's products (`cargo bench --bench products`) against the same shapes
# through PyTorch (benches/products_torch.py), in one sitting, alternating: ours, torch, ours,
# torch. Prints one Markdown table: each case's time in both rounds, ours against its bound
# (measured in our process), and PyTorch's time and its ratio to ours.
#
#   scripts/bench-products-vs-torch.sh [REPS]
#
# PYTHON: a Python with torch (default: ~/.cache/entropy-lens/pyref if present, else the tuned-lens
# environment of scripts/tuned-lens-venv.sh, which has torch 2.15.0, else python3). Keep the
# machine otherwise quiet.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${1:-7}"
CACHE="${ENTROPY_LENS_CACHE:-$HOME/.cache/entropy-lens}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
if [ -z "${PYTHON:-}" ]; then
  PYTHON=python3
  [ -x "$CACHE/tunedlens/bin/python" ] && PYTHON="$CACHE/tunedlens/bin/python"
  [ -x "$CACHE/pyref/bin/python" ] && PYTHON="$CACHE/pyref/bin/python"
fi
"$PYTHON" -c 'import torch' 2>/dev/null || {
  echo "error: $PYTHON has no torch: set PYTHON, or run scripts/tuned-lens-venv.sh" >&2
  exit 2
}
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
cargo bench --bench products --no-run 2>&1 | tail -1 >&2
for round in 1 2; do
  echo "round $round: ours" >&2
  cargo bench --bench products -- --reps "$REPS" --json "$OUT/ours-$round.jsonl" >&2
  echo "round $round: torch" >&2
  "$PYTHON" benches/products_torch.py --reps "$REPS" >"$OUT/torch-$round.jsonl"
done
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def load(name):
    return [json.loads(l) for l in (out / name).read_text().splitlines() if l.strip()]
ours = [{r["case"]: r for r in load(f"ours-{k}.jsonl")} for k in (1, 2)]
torch = [{r["case"]: r for r in load(f"torch-{k}.jsonl") if "case" in r} for k in (1, 2)]
meta = [r for r in load("torch-1.jsonl") if "torch" in r][0]
first = next(iter(ours[0].values()))
print(f"{first['cpu']}, {first['threads']} threads; torch {meta['torch']} ({meta['threads']} threads)")
for k in (0, 1):
    r = next(iter(ours[k].values()))
    print(f"round {k + 1}: read bandwidth {r['bandwidth_gbs']:.1f} GB/s, FMA peak "
          f"{r['fma_peak_gflops']:.0f} GFLOP/s, candle's GEMM 2048² {r['gemm_gflops']:.0f} GFLOP/s")
print()
print("| case | ours (ms), rounds 1, 2 | rate | % of its bound | torch (ms), rounds 1, 2 | torch's rate | torch ÷ ours (time) |")
print("|---|---|---|---|---|---|---|")
for case in ours[0]:
    o = [ours[k][case] for k in (0, 1)]
    t = [torch[k][case]["ms"] for k in (0, 1)]
    lens = case.startswith("lens")
    def rate(ms, r):
        return f"{r['flop'] / ms / 1e6:.0f} GFLOP/s" if lens else f"{r['bytes'] / ms / 1e6:.1f} GB/s"
    pct = "–".join(f"{100 * r['bound_ms'] / r['ms']:.0f}" for r in o)
    ratio = "–".join(f"{tm / r['ms']:.2f}" for tm, r in zip(t, o))
    print(f"| {case} | {o[0]['ms']:.1f}, {o[1]['ms']:.1f} | {rate(o[0]['ms'], o[0])}, "
          f"{rate(o[1]['ms'], o[1])} | {pct} % | {t[0]:.1f}, {t[1]:.1f} | "
          f"{rate(t[0], o[0])}, {rate(t[1], o[1])} | {ratio} |")
PY
