#!/usr/bin/env python3
"""entropy-lens's Python API and CLI against the PyPI package `entropy-profiler` 0.2.1, on the same
work, the same f32 weights and the same machine, with every profile checked against a float64
transformers reference.

Work: the eight prompts of benches/prompts.txt, 32 greedy tokens each (past the end of sequence),
Shannon entropy of the logit lens at all 30 blocks of SmolLM2-135M for every generated token
(256 rows of 30 blocks). Tools, each run in a fresh process per repetition, in rotated order:

  peer      entropy-profiler: `EntropyProfiler(dir, device="cpu", dtype=torch.float32)`, then
            `profile_text(prompt, max_new_tokens=32)` per prompt (what its `profile_batch` does).
            It has no ignore-EOS option: the script sets `model.generation_config.eos_token_id =
            None` after loading so that every prompt gets 32 tokens like the others.
  api-b1    `entropy_lens.Profiler.load(dir, dtype="f32").profile(prompts, generate=32,
            ignore_eos=True, batch_size=1)`
  api-b8    the same with the default batch (batch_size=None: 8 on the CPU)
  cli-b1    `entropy-lens profile --model dir --dtype f32 --prompts P --generate 32 --ignore-eos
            --json --batch-size 1`; `cli-b8`: `--batch-size 8`

entropy-lens computes its defaults besides Shannon (top-p count, top-5 tokens); the peer only the
entropy. tokens/s = 256 / seconds: "run" excludes loading (the profile calls only), "with load" adds
the model's load (API, peer: the constructor's time; CLI: the whole process, start to exit).

Reference: the exported folder loaded by transformers in float64; each tool's prompt + generated
ids teacher-forced in one forward; a forward hook on every decoder layer takes its output before the
final norm, then `model.model.norm` + `lm_head`; block 30 is the model's own logits; entropy in
float64. Rows are compared only while the tool's greedy ids agree with the reference's argmax (an
identical prefix). Reported: max |error| in nats over all compared rows, blocks 1-29 and block 30.

    ~/.cache/entropy-lens/peer-venv/bin/python scripts/bench-python-peer.py [--reps 3]
        [--model-dir DIR] [--cli PATH]

The venv holds torch (CPU), transformers, accelerate (entropy-profiler's device_map needs it),
entropy-profiler==0.2.1, numpy and the entropy-lens wheel. DIR (default
~/.cache/entropy-lens/smollm2-hf) is made if missing with `entropy-lens export-hf --model smollm2`.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ENTROPY_LENS_CACHE")
             or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "entropy-lens")
PROMPTS = (ROOT / "benches" / "prompts.txt").read_text(encoding="utf-8").splitlines()
TOKENS = 32
TOOLS = ["peer", "api-b1", "api-b8", "cli-b1", "cli-b8"]


# ------------------------------------------------------------------------------------- workers

def worker_peer(model_dir):
    import torch
    from entropy_profiler import EntropyProfiler

    t = time.perf_counter()
    ep = EntropyProfiler(model_dir, device="cpu", dtype=torch.float32)
    ep.model.generation_config.eos_token_id = None  # no ignore-EOS option: 32 tokens for every prompt
    load = time.perf_counter() - t
    t = time.perf_counter()
    profs = [ep.profile_text(p, max_new_tokens=TOKENS) for p in PROMPTS]
    run = time.perf_counter() - t
    out = []
    for p, pr in zip(PROMPTS, profs):
        out.append({"prompt_ids": ep.tokenizer(p)["input_ids"],
                    "generated_ids": pr.token_ids.tolist(),
                    "shannon": pr.to_numpy().astype(float).tolist()})
    return {"load_s": load, "run_s": run, "profiles": out}


def worker_api(model_dir, batch_size):
    import entropy_lens as el

    t = time.perf_counter()
    lens = el.Profiler.load(model_dir, dtype="f32")
    load = time.perf_counter() - t
    t = time.perf_counter()
    profs = lens.profile(PROMPTS, generate=TOKENS, ignore_eos=True, batch_size=batch_size)
    run = time.perf_counter() - t
    out = [{"prompt_ids": list(p.prompt_ids), "generated_ids": list(p.generated_ids),
            "shannon": p.shannon.tolist()} for p in profs]
    return {"load_s": load, "run_s": run, "profiles": out}


def worker_reference(model_dir, seqs_file):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_grad_enabled(False)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float64).eval()
    layers = model.model.layers
    saved = [None] * len(layers)

    def hook(i):
        def save(_module, _inputs, output):
            saved[i] = output[0] if isinstance(output, tuple) else output
        return save

    for i, layer in enumerate(layers):
        layer.register_forward_hook(hook(i))

    def entropy(logits):
        logp = torch.log_softmax(logits, dim=-1)
        return -(logp.exp() * logp).sum(-1)

    out = []
    for prompt_ids, gen_ids in json.loads(Path(seqs_file).read_text()):
        ids = torch.tensor([prompt_ids + gen_ids[:-1]])
        logits = model(ids).logits[0]
        rows = slice(len(prompt_ids) - 1, ids.shape[1])  # row i predicts generated token i + 1
        cols = [entropy(model.lm_head(model.model.norm(h[0, rows]))) for h in saved[:-1]]
        cols.append(entropy(logits[rows]))
        out.append({"shannon": torch.stack(cols, dim=1).tolist(),
                    "argmax": logits[rows].argmax(-1).tolist()})
    return out


# ------------------------------------------------------------------------------------- driver

def run_child(cmd):
    """Runs cmd; returns (stdout, wall seconds, peak RSS MiB of that child alone)."""
    with tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
        out = p.stdout.read()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            sys.exit(f"{cmd[:3]}... failed ({p.returncode}):\n{err.read().decode()[-3000:]}")
    return out.decode(), wall, usage.ru_maxrss / 1024


def measure(tool, model_dir, cli, prompts_file):
    if tool.startswith("cli"):
        cmd = [cli, "profile", "--model", model_dir, "--dtype", "f32", "--prompts", prompts_file,
               "--generate", str(TOKENS), "--ignore-eos", "--json",
               "--batch-size", tool.split("-b")[1]]
        out, wall, rss = run_child(cmd)
        profs = []
        for line in out.splitlines():
            d = json.loads(line)
            profs.append({"prompt_ids": d["prompt_ids"], "generated_ids": d["generated_ids"],
                          "shannon": [pos["shannon"] for pos in d["positions"]]})
        return {"load_s": None, "run_s": None, "wall_s": wall, "rss_mib": rss, "profiles": profs}
    out, wall, rss = run_child([sys.executable, __file__, "--worker", tool, "--model-dir", model_dir])
    res = json.loads(out)
    res["wall_s"], res["rss_mib"] = wall, rss
    return res


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--model-dir", default=str(CACHE / "smollm2-hf"))
    ap.add_argument("--cli", default=str(CACHE / "target" / "release" / "entropy-lens"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--seqs", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        if a.worker == "peer":
            res = worker_peer(a.model_dir)
        elif a.worker.startswith("api-b"):
            b = int(a.worker.split("-b")[1])
            res = worker_api(a.model_dir, None if b == 8 else b)
        else:
            res = worker_reference(a.model_dir, a.seqs)
        print(json.dumps(res))
        return

    if not (Path(a.model_dir) / "config.json").exists():
        subprocess.run([a.cli, "export-hf", "--model", "smollm2", "--out", a.model_dir], check=True)
    import entropy_lens
    import torch
    import transformers
    from importlib.metadata import version

    print(f"# bench-python-peer, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), transformers {transformers.__version__}, "
          f"entropy-profiler {version('entropy-profiler')}, entropy-lens {version('entropy-lens')}")
    print(f"# model: {a.model_dir} (f32 safetensors); {len(PROMPTS)} prompts x {TOKENS} tokens, "
          f"{a.reps} repetitions, tools in rotated order")
    print(f"# load before: {uptime()}")

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for p in PROMPTS:
            f.write(json.dumps({"prompt": p}) + "\n")
        prompts_file = f.name

    results = {t: [] for t in TOOLS}
    for r in range(a.reps):
        order = TOOLS[r % len(TOOLS):] + TOOLS[:r % len(TOOLS)]
        for tool in order:
            res = measure(tool, a.model_dir, a.cli, prompts_file)
            results[tool].append(res)
            print(f"#   rep {r + 1} {tool}: wall {res['wall_s']:.2f} s, peak RSS {res['rss_mib']:.0f} MiB"
                  + (f", load {res['load_s']:.2f} s, run {res['run_s']:.2f} s"
                     if res["load_s"] is not None else ""), flush=True)
    print(f"# load after (raised by this run itself): {uptime()}")

    # Every repetition of a tool must give the same ids and entropies.
    for tool in TOOLS:
        first = results[tool][0]["profiles"]
        same = all(r["profiles"] == first for r in results[tool][1:])
        if not same:
            print(f"# NOTE: {tool}'s outputs differ between repetitions; the first is compared")

    # Reference on every distinct (prompt ids, generated ids) the tools produced.
    seqs = []
    for tool in TOOLS:
        for p in results[tool][0]["profiles"]:
            key = [p["prompt_ids"], p["generated_ids"]]
            if key not in seqs:
                seqs.append(key)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(seqs, f)
        seqs_file = f.name
    out, _, _ = run_child([sys.executable, __file__, "--worker", "reference", "--model-dir",
                        a.model_dir, "--seqs", seqs_file])
    refs = json.loads(out)
    print(f"# reference: transformers float64, {len(seqs)} distinct sequence(s) teacher-forced")

    import numpy as np

    rows = []
    base = {}
    for tool in TOOLS:
        reps = results[tool]
        if reps[0]["run_s"] is not None:
            run = statistics.median(r["run_s"] for r in reps)
            with_load = statistics.median(r["run_s"] + r["load_s"] for r in reps)
            load = statistics.median(r["load_s"] for r in reps)
        else:
            run, load = None, None
            with_load = statistics.median(r["wall_s"] for r in reps)
        wall = statistics.median(r["wall_s"] for r in reps)
        rss = statistics.median(r["rss_mib"] for r in reps)
        n_tok = sum(len(p["generated_ids"]) for p in reps[0]["profiles"])
        err_lo, err_hi, compared, diverged = 0.0, 0.0, 0, []
        for i, p in enumerate(reps[0]["profiles"]):
            ref = refs[seqs.index([p["prompt_ids"], p["generated_ids"]])]
            gen, arg = p["generated_ids"], ref["argmax"]
            n = next((k for k in range(len(gen)) if gen[k] != arg[k]), len(gen))
            keep = min(n + 1, len(gen))  # row n still has an identical input
            if n < len(gen):
                diverged.append(f"prompt {i + 1} at token {n + 1}")
            e = np.abs(np.array(p["shannon"])[:keep] - np.array(ref["shannon"])[:keep])
            err_lo = max(err_lo, float(e[:, :-1].max()))
            err_hi = max(err_hi, float(e[:, -1].max()))
            compared += keep
        rows.append((tool, n_tok, load, run, with_load, wall, rss, err_lo, err_hi, compared,
                     diverged))
        if tool == "peer":
            base = {"run": n_tok / run, "with": n_tok / with_load}

    print()
    print("| tool | tokens | load (s) | tok/s, run | × peer | tok/s, with load | × peer | "
          "peak RSS (MiB) | max \\|err\\| blocks 1-29 (nats) | max \\|err\\| block 30 (nats) | "
          "rows compared |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for tool, n_tok, load, run, with_load, wall, rss, lo, hi, compared, diverged in rows:
        r_run = n_tok / run if run else None
        r_with = n_tok / with_load
        print(f"| {tool} | {n_tok} | {'%.2f' % load if load is not None else '—'} | "
              f"{'%.1f' % r_run if r_run else '—'} | "
              f"{'%.2f×' % (r_run / base['run']) if r_run else '—'} | {r_with:.1f} | "
              f"{r_with / base['with']:.2f}× | {'%.0f' % rss if rss else '—'} | "
              f"{lo:.1e} | {hi:.1e} | {compared} |")
    print()
    for tool, *_, diverged in rows:
        if diverged:
            print(f"# {tool}: greedy ids leave the float64 reference's at {', '.join(diverged)}; "
                  "rows after that are not compared")
        else:
            print(f"# {tool}: greedy ids identical to the float64 reference's for all prompts")
    ids = {t: [p["generated_ids"] for p in results[t][0]["profiles"]] for t in TOOLS}
    print("# generated ids identical across tools:", all(v == ids["peer"] for v in ids.values()))


if __name__ == "__main__":
    main()
