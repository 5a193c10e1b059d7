#!/usr/bin/env python3
"""Throughput of three ways to take logit-lens entropy profiles while generating, in one run on
one machine, with the same model (SmolLM2-135M, float32, on the CPU):

  (a) authors  - the approach of the authors' released code, re-implemented here: for every
                 generated token a full forward over the whole sequence so far (no KV cache) with
                 the hidden states of every layer at every position kept, then logits materialised
                 for every layer at the last position, entropy; one prompt at a time.
  (b) hooks    - transformers with a KV cache and a forward hook on every decoder layer, the lens
                 on the hooked last-position states; prompts batched with left padding.
  (c) entropy-lens - `cargo bench --bench throughput` (the library's batched runner).

Each pipeline computes the Shannon entropy at every block for every generated token (greedy, past
the end of sequence). Cases: 1 prompt x 32 tokens, 8 prompts x 32 tokens, 8 prompts x 256 tokens,
32 prompts x 32 tokens (the eight prompts four times over).
Every (pipeline, case) runs in its own process, so its peak resident memory is its own; tokens/s is
the median over repetitions after a warm-up. The machine's memory read bandwidth and f32 GEMM rate
are measured by the same script (torch, same threads) so the figures can be read against them.

    ~/.cache/entropy-lens/pyref/bin/python scripts/compare-pipelines.py [--reps 3] [--quick]
        [--cases b1x32,b8x32,b8x256,b32x32] [--pipelines authors,hooks,entropy-lens]

`--pipelines entropy-lens` measures only the library against this machine's limits (no
transformers needed beyond reading the model's shape).

Needs torch, transformers (>= 5; GGUF loading needs `gguf`) and numpy; prints the Markdown table
that docs/benchmarks.md records. `--quick`: one repetition. The authors' approach runs one prompt at
a time, so its rate does not depend on the number of prompts: with 8 prompts it is measured once, and
at 256 tokens on 2 of the 8 prompts (a full repetition would take most of an hour on two cores).
"""

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The same eight prompts as benches/throughput.rs (one per line).
PROMPTS = (ROOT / "benches" / "prompts.txt").read_text(encoding="utf-8").splitlines()
CASES = {"b1x32": (1, 32), "b8x32": (8, 32), "b8x256": (8, 256), "b32x32": (32, 32)}
PIPELINES = ["authors", "hooks", "entropy-lens"]


def model_file():
    cache = os.environ.get("ENTROPY_LENS_MODELS") or str(
        Path(os.environ.get("ENTROPY_LENS_CACHE")
             or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "entropy-lens")
        / "models")
    path = Path(cache) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.exists():
        sys.exit(f"{path} is missing: run `entropy-lens fetch-models` first")
    return path


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ----------------------------------------------------------------------------- workers (torch)

def load_torch_model(path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32)
    model.eval()
    return tok, model


def shannon(logits):
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def run_authors(tok, model, prompts, tokens):
    """Full forward over the growing sequence for every token; all layers' logits materialised."""
    import torch

    norm, head = model.model.norm, model.lm_head
    generated = 0
    with torch.no_grad():
        for prompt in prompts:
            ids = tok(prompt, return_tensors="pt").input_ids
            for _ in range(tokens):
                out = model(ids, output_hidden_states=True, use_cache=False)
                # hidden_states[1..L]: after each block (all positions captured, as
                # TransformerLens' run_with_cache does); the lens reads the last position.
                # transformers' last entry is already normed: its logits are the model's.
                hs = out.hidden_states
                per_layer = [head(norm(h[:, -1, :])) for h in hs[1:-1]] + [out.logits[:, -1, :]]
                entropies = torch.stack([shannon(l) for l in per_layer], dim=-1)
                assert entropies.shape[-1] == len(hs) - 1
                nxt = out.logits[:, -1, :].argmax(-1, keepdim=True)
                ids = torch.cat([ids, nxt], dim=1)
                generated += 1
    return generated


def run_hooks(tok, model, prompts, tokens):
    """KV cache, a hook on every decoder layer, the lens on the hooked states; left-padded batch."""
    import torch
    from transformers import DynamicCache

    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    layers = model.model.layers
    captured = [None] * len(layers)

    def hook(i):
        def save(_module, _inputs, output):
            h = output[0] if isinstance(output, tuple) else output
            captured[i] = h[:, -1, :]
        return save

    handles = [layer.register_forward_hook(hook(i)) for i, layer in enumerate(layers)]
    norm, head = model.model.norm, model.lm_head
    generated = 0
    try:
        with torch.no_grad():
            enc = tok(prompts, return_tensors="pt", padding=True)
            ids, mask = enc.input_ids, enc.attention_mask
            cache = DynamicCache()
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            out = model(ids, attention_mask=mask, position_ids=positions,
                        past_key_values=cache, use_cache=True)
            for step in range(tokens):
                states = torch.stack(captured, dim=1)  # [b, L, d]
                entropies = shannon(head(norm(states)))  # [b, L]
                assert entropies.shape == (len(prompts), len(layers))
                nxt = out.logits[:, -1, :].argmax(-1, keepdim=True)
                generated += len(prompts)
                if step + 1 == tokens:
                    break
                mask = torch.cat([mask, torch.ones_like(nxt)], dim=1)
                positions = positions[:, -1:] + 1
                out = model(nxt, attention_mask=mask, position_ids=positions,
                            past_key_values=out.past_key_values, use_cache=True)
    finally:
        for h in handles:
            h.remove()
    return generated


def worker(pipeline, case, reps, authors_prompts):
    import torch

    n_prompts, tokens = CASES[case]
    # More prompts than the file holds: the file again from its start (as the bench does).
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(n_prompts)]
    if pipeline == "authors" and authors_prompts:
        prompts = prompts[:authors_prompts]
    tok, model = load_torch_model(model_file())
    run = run_authors if pipeline == "authors" else run_hooks
    run(tok, model, prompts, 4)  # warm-up
    rates = []
    for _ in range(reps):
        t = time.perf_counter()
        n = run(tok, model, prompts, tokens)
        rates.append(n / (time.perf_counter() - t))
    print(json.dumps({
        "pipeline": pipeline, "case": case, "prompts": len(prompts), "tokens": tokens,
        "tokens_per_s": statistics.median(rates), "runs": rates,
        "peak_rss_mib": peak_rss_mib(), "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }))


def limits():
    """Memory read bandwidth and f32 GEMM rate with torch on this process's threads."""
    import torch

    x = torch.ones(1 << 28)  # 1 GiB
    x.sum()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t)
    bandwidth = x.numel() * 4 / best / 1e9
    del x
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    gemm = 2 * n**3 / best / 1e9
    print(json.dumps({"bandwidth_gb_s": bandwidth, "gemm_gflop_s": gemm,
                      "threads": torch.get_num_threads()}))


# ----------------------------------------------------------------------------- driver

def child(cmd):
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def model_shape():
    cfg = json.loads(subprocess.run(
        [sys.executable, "-c", (
            "import json,sys;from transformers import AutoConfig;"
            "p=sys.argv[1].rsplit('/',1);c=AutoConfig.from_pretrained(p[0],gguf_file=p[1]);"
            "print(json.dumps({'layers':c.num_hidden_layers,'hidden':c.hidden_size,"
            "'vocab':c.vocab_size,'ffn':c.intermediate_size,'heads':c.num_attention_heads,"
            "'kv_heads':c.num_key_value_heads}))"),
         str(model_file())], check=True, capture_output=True, text=True).stdout)
    return cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--worker", nargs=2, metavar=("PIPELINE", "CASE"))
    ap.add_argument("--authors-prompts", type=int, default=0)
    ap.add_argument("--limits", action="store_true")
    ap.add_argument("--json", type=Path, help="also write every measurement here")
    ap.add_argument("--cases", default="b1x32,b8x32,b8x256",
                    help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--pipelines", default=",".join(PIPELINES),
                    help=f"comma-separated, of {', '.join(PIPELINES)}")
    args = ap.parse_args()
    if args.worker:
        return worker(*args.worker, args.reps, args.authors_prompts)
    if args.limits:
        return limits()
    if unknown := set(args.cases.split(",")) - set(CASES):
        sys.exit(f"unknown cases {sorted(unknown)}: choose among {list(CASES)}")
    cases = {c: CASES[c] for c in args.cases.split(",")}
    pipelines = [p for p in PIPELINES if p in args.pipelines.split(",")]
    if unknown := set(args.pipelines.split(",")) - set(PIPELINES):
        sys.exit(f"unknown pipelines {sorted(unknown)}: choose among {PIPELINES}")

    reps = 1 if args.quick else args.reps
    me = [sys.executable, __file__]
    subprocess.run(["cargo", "bench", "--bench", "throughput", "--no-run"], cwd=ROOT,
                   check=True, capture_output=True)
    started = time.strftime("%Y-%m-%d %H:%M")
    results = {"limits": child(me + ["--limits"])}
    rows = []
    for case, (n_prompts, tokens) in cases.items():
        for pipeline in pipelines:
            if pipeline == "entropy-lens":
                cmd = ["cargo", "bench", "-q", "--bench", "throughput", "--",
                       "--case", case, "--reps", str(reps), "--dtype", "f32"]
            else:
                cmd = me + ["--worker", pipeline, case]
                if pipeline == "authors" and n_prompts > 1:
                    # One prompt at a time: its rate does not depend on how many prompts there
                    # are, and a repetition of 8 x 256 tokens would take most of an hour.
                    cmd += ["--reps", "1"]
                    if tokens > 32:
                        cmd += ["--authors-prompts", "2"]
                else:
                    cmd += ["--reps", str(reps)]
            print(f"{case} {pipeline} ...", file=sys.stderr, flush=True)
            r = child(cmd)
            print(f"  {r['tokens_per_s']:.2f} tokens/s, {r['peak_rss_mib']:.0f} MiB"
                  + (f", no lens {r['no_lens_tokens_per_s']:.2f}" if "no_lens_tokens_per_s" in r
                     else ""),
                  file=sys.stderr, flush=True)
            rows.append(r)
    results["rows"] = rows
    shape = model_shape()
    results["model"] = shape
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))

    lim = results["limits"]
    d, L, V, F = shape["hidden"], shape["layers"], shape["vocab"], shape["ffn"]
    kv = shape["hidden"] // shape["heads"] * shape["kv_heads"]
    block_params = L * (2 * d * d + 2 * d * kv + 3 * d * F)
    weight_bytes = 4 * (block_params + V * d)  # the tied unembedding is read once per step
    flops_token = 2 * (block_params + L * V * d)  # the lens decodes all L blocks
    print(f"Measured {started} on {platform.node()} ({os.cpu_count()} CPUs, "
          f"torch threads {lim['threads']}): memory read {lim['bandwidth_gb_s']:.1f} GB/s, "
          f"f32 GEMM {lim['gemm_gflop_s']:.0f} GFLOP/s. SmolLM2-135M f32: "
          f"{weight_bytes / 1e6:.0f} MB of weights read per decoding step, "
          f"{flops_token / 1e9:.2f} GFLOP per generated token with the lens at all {L} blocks.\n")
    by = {(r["case"], r["pipeline"]): r for r in rows}
    print("| case | pipeline | tokens/s (median) | peak RSS (MiB) | entropy-lens ÷ this | "
          "% of this machine's limit | limit (tokens/s), bound by |")
    print("|---|---|---|---|---|---|---|")
    for case, (n_prompts, tokens) in cases.items():
        ours = by.get((case, "entropy-lens"), {}).get("tokens_per_s")
        # Batch 1 reads every weight once per token; a batch of b shares that read across b tokens.
        mem_bound = lim["bandwidth_gb_s"] * 1e9 / weight_bytes * n_prompts
        compute_bound = lim["gemm_gflop_s"] * 1e9 / flops_token
        limit = min(mem_bound, compute_bound)
        for pipeline in pipelines:
            r = by[(case, pipeline)]
            label = {"authors": "authors' approach (full forward per token)",
                     "hooks": "transformers + KV cache + hooks",
                     "entropy-lens": "entropy-lens"}[pipeline]
            extra = f" ({r['prompts']} of {n_prompts} prompts)" if r["prompts"] != n_prompts else ""
            ratio = ("1" if pipeline == "entropy-lens" else
                     "—" if ours is None else f"{ours / r['tokens_per_s']:.1f}×")
            print(f"| {n_prompts} × {tokens} | {label}{extra} | {r['tokens_per_s']:.2f} | "
                  f"{r['peak_rss_mib']:.0f} | {ratio} | {100 * r['tokens_per_s'] / limit:.0f} % | "
                  f"{limit:.0f}, {'memory' if mem_bound < compute_bound else 'compute'} |")
    print(f"\nLimit per case: min(memory-bound {lim['bandwidth_gb_s']:.0f} GB/s ÷ weights × prompts "
          f"per step, compute-bound GEMM rate ÷ FLOP per token).")
    # Where entropy-lens' time goes: the bench also decodes the same batch with no lens at all.
    ours_rows = [(c, by[(c, "entropy-lens")]) for c in cases if (c, "entropy-lens") in by]
    if ours_rows:
        lens_flop = 2 * L * V * d
        print("\n| case | with the lens (tokens/s) | no lens (tokens/s) | lens, ms per token | "
              "lens GFLOP/s (product + statistics) | ÷ the measured GEMM rate |")
        print("|---|---|---|---|---|---|")
        for case, r in ours_rows:
            n_prompts, tokens = cases[case]
            lens_s = 1 / r["tokens_per_s"] - 1 / r["no_lens_tokens_per_s"]
            if lens_s <= 0:
                # Noise: the run with the lens was not slower than the run without.
                print(f"| {n_prompts} × {tokens} | {r['tokens_per_s']:.2f} | "
                      f"{r['no_lens_tokens_per_s']:.2f} | — | — | — |")
                continue
            rate = lens_flop / lens_s / 1e9
            print(f"| {n_prompts} × {tokens} | {r['tokens_per_s']:.2f} | "
                  f"{r['no_lens_tokens_per_s']:.2f} | {1e3 * lens_s:.1f} | {rate:.0f} | "
                  f"{100 * rate / lim['gemm_gflop_s']:.0f} % |")


if __name__ == "__main__":
    main()
