#!/usr/bin/env python3
"""Two builds of entropy-lens on the same `profile` work, interleaved, with their outputs compared.

Usage: scripts/ab-binaries.py BASELINE CANDIDATE [--reps 3] [--batch 8] [--tokens 32] [--model FILE]...

Runs `profile --json` on 8 prompts (one batch at --batch 8), generating --tokens tokens each with
the three Rényi orders of `formats`, on each model (default: the two offline models), alternating
baseline and candidate --reps times so that drift in the machine's speed hits both alike. Prints
the median wall and CPU seconds of each and the candidate's speed-up, and whether the two builds
wrote the same bytes (a change meant to be exact must say "identical"). Standard library only.
"""
import argparse
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

PROMPTS = [
    "Write a short poem about the sea.",
    "Explain photosynthesis to a child.",
    "Once upon a time, a little fox",
    "List three uses of copper.",
    "The capital of France is",
    "Summarize the plot of Hamlet in two sentences.",
    "Translate 'good morning' into Spanish.",
    "Describe a thunderstorm.",
]


def run(binary, model, prompts, tokens, batch, out):
    """Wall and CPU (user + system) seconds of one `profile` run; its stdout goes to `out`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(out, "wb") as f:
        subprocess.run(
            [binary, "profile", "--model", model, "--prompts", prompts, "--generate", str(tokens),
             "--ignore-eos", "--alpha", "0.5", "1", "5", "--batch-size", str(batch), "--json"],
            stdout=f, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline")
    parser.add_argument("candidate")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--model", action="append", help="GGUF file (repeatable)")
    args = parser.parse_args()
    models_dir = pathlib.Path(os.environ.get(
        "ENTROPY_LENS_MODELS", pathlib.Path.home() / ".cache/entropy-lens/models"))
    models = args.model or [str(models_dir / "SmolLM2-135M-Instruct.Q4_1.gguf"),
                            str(models_dir / "gemma-3-270m-q4_k_m.gguf")]
    for b in (args.baseline, args.candidate):
        if not os.access(b, os.X_OK):
            sys.exit(f"not an executable: {b}")
    with tempfile.TemporaryDirectory() as tmp:
        prompts = pathlib.Path(tmp) / "prompts.jsonl"
        prompts.write_text("".join('{"prompt": "%s"}\n' % p for p in PROMPTS))
        rows = []
        for model in models:
            times = {"baseline": [], "candidate": []}
            outs = {}
            for _ in range(args.reps):
                for name, binary in (("baseline", args.baseline), ("candidate", args.candidate)):
                    outs[name] = pathlib.Path(tmp) / f"{name}.jsonl"
                    times[name].append(run(binary, model, prompts, args.tokens, args.batch, outs[name]))
            same = outs["baseline"].read_bytes() == outs["candidate"].read_bytes()
            med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
                   for k, v in times.items()}
            rows.append((pathlib.Path(model).stem, med, same))
    print(f"{len(PROMPTS)} prompts × {args.tokens} tokens, batch {args.batch}, α 0.5 1 5; "
          f"median of {args.reps} interleaved runs each; {os.cpu_count()} CPUs")
    print()
    print("| model | baseline wall (s) | candidate wall (s) | speed-up (wall) | baseline CPU (s) "
          "| candidate CPU (s) | speed-up (CPU) | outputs |")
    print("|---|---|---|---|---|---|---|---|")
    for name, med, same in rows:
        (bw, bc), (cw, cc) = med["baseline"], med["candidate"]
        print(f"| {name} | {bw:.2f} | {cw:.2f} | {bw / cw:.2f}× | {bc:.2f} | {cc:.2f} | "
              f"{bc / cc:.2f}× | {'identical' if same else 'DIFFERENT'} |")


if __name__ == "__main__":
    main()
