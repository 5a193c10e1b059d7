"""The shapes of `cargo bench --bench products` through PyTorch's CPU products, as a reference
from an independent, vendor-tuned BLAS: one JSON object per case on stdout (`case`, `ms`).

    python benches/products_torch.py [--reps 7] [--threads N]

Same shapes as the Rust bench (SmolLM2-135M's: 30 blocks of stacked q/k/v 960 x 576, o 576 x 576,
stacked gate/up 3072 x 576, down 576 x 1536; the unembedding 49152 x 576), random float32
weights, `torch.nn.functional.linear`, the median of `--reps` runs after a warm-up. Threads: as
many as the CPUs this process may run on (rayon's default), unless given.
"""

import argparse
import json
import os
import statistics
import time

import torch

D, LAYERS, VOCAB = 576, 30, 49152
BLOCK_SHAPES = [(960, D), (D, D), (3072, D), (D, 1536)]


def timed(reps, f):
    f()
    runs = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    blocks = [
        [torch.randn(o, i) * 0.05 for o, i in BLOCK_SHAPES] for _ in range(LAYERS)
    ]
    unembedding = torch.randn(VOCAB, D) * 0.05
    linear = torch.nn.functional.linear
    with torch.inference_mode():
        for m in (1, 8, 32):
            xs = {D: torch.randn(m, D), 1536: torch.randn(m, 1536)}

            def step(xs=xs):
                for block in blocks:
                    for w, (_, inner) in zip(block, BLOCK_SHAPES):
                        linear(xs[inner], w)

            print(
                json.dumps(
                    {"case": f"decoder m{m}", "ms": 1e3 * timed(args.reps, step)}
                )
            )
        for m in (30, 240, 960):
            x = torch.randn(m, D)
            secs = timed(args.reps, lambda x=x: linear(x, unembedding))
            print(json.dumps({"case": f"lens m{m}", "ms": 1e3 * secs}))
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
