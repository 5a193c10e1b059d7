#!/usr/bin/env python3
"""Print the tables of docs/results.md and docs/results-tuned-lens.md from a results folder's result.json files.

    python3 scripts/results-tables.py [DIR]        (default docs/results)

Every row is the page's format: percentages with two decimals, ρ with four, p-values with two significant
digits. The page's tables are pasted from this output, so each number on it traces to a committed
`docs/results/<run>/result.json` (or `lenses/<model>/train_report.json`). Runs that are missing are skipped.
"""

import json
import os
import re
import sys

MODELS = [("SmolLM2-135M-Instruct.Q4_1", "SmolLM2-135M-Instruct"), ("gemma-3-270m-q4_k_m", "Gemma-3-270M")]

# The two scripts whose steps share a results folder: (script, page, is this step the script's?).
# The tuned-lens steps by name: TUNED_LENS_STEPS of scripts/results-common.sh, the scripts' own rule.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results-common.sh")) as _f:
    TUNED_LENS_STEP = re.compile(re.search(r"^TUNED_LENS_STEPS='([^']*)'$", _f.read(), re.M).group(1))
PARTS = [
    ("scripts/results.sh", "docs/results.md", lambda step: not TUNED_LENS_STEP.search(step)),
    ("scripts/results-tuned-lens.sh", "docs/results-tuned-lens.md", lambda step: bool(TUNED_LENS_STEP.search(step))),
]


def load(root, run):
    path = os.path.join(root, run, "result.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def each_model(root, prefix):
    """(run name, result) of `prefix-<model>` for each offline model whose run is there."""
    for run, _ in MODELS:
        r = load(root, f"{prefix}-{run}")
        if r is not None:
            yield run, r


def pct(mean, sd=None):
    return f"{100 * mean:.2f}" if sd is None else f"{100 * mean:.2f} ± {100 * sd:.2f}"


def pval(p):
    return f"{p:.1e}"


def table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


def validate(root, suffix=""):
    rows = []
    for run, r in each_model(root, f"validate{suffix}"):
        h = r["mean_entropy_by_block"]
        s = r["mean_top_p_count_by_block"]
        rows.append([run, f"{r['c1_spearman']:.4f}",
                     f"{r['c1_per_prompt_mean']:.3f} ± {r['c1_per_prompt_std']:.3f}", f"{r['c1_n_pairs']:,}",
                     f"{r['c2_mean']:.3f}", f"{r['c2_mean_previous']:.3f}", f"{r['c2_mean_jaccard']:.3f}",
                     f"{sum(h) / len(h):.2f}", f"{sum(s) / len(s):.1f}"])
    if rows:
        print(f"## validate{suffix} (Table 1, Figure 1)\n")
        table(["model", "ρ pooled", "ρ per prompt", "pairs", "C2 /\\|S_i\\|", "/\\|S_i−1\\|", "Jaccard",
               "mean H (nats)", "mean \\|S\\|"], rows)


def blocks(root):
    """Mean entropy and top-p count per block, logit beside tuned (the tuned-lens section's tables)."""
    for run, _ in MODELS:
        logit, tuned = load(root, f"validate-{run}"), load(root, f"validate-tuned-{run}")
        if logit is None or tuned is None:
            continue
        print(f"## entropy by block, {run}, logit vs tuned\n")
        hl, ht = logit["mean_entropy_by_block"], tuned["mean_entropy_by_block"]
        sl, st = logit["mean_top_p_count_by_block"], tuned["mean_top_p_count_by_block"]
        rows = []
        for i in range(len(hl)):
            dl = f"{hl[i] - hl[i - 1]:+.2f}" if i else ""
            dt = f"{ht[i] - ht[i - 1]:+.2f}" if i else ""
            rows.append([str(i + 1), f"{hl[i]:.2f}", f"{ht[i]:.2f}", dl, dt, f"{sl[i]:.1f}", f"{st[i]:.1f}"])
        table(["block", "H logit", "H tuned", "ΔH logit", "ΔH tuned", "\\|S\\| logit", "\\|S\\| tuned"], rows)


def tasks(root):
    rows = []
    subsets = {}
    for kind, label in [("", ""), ("-sampled", ", sampled (T = 1)"), ("-chat", ", chat template"),
                        ("-tuned", ", tuned lens")]:
        for run, name in MODELS:
            r = load(root, f"tasks{kind}-{run}")
            if r is None:
                continue
            rows.append([f"{name}{label}", pct(r["auc_mean"], r["auc_std"]),
                         pct(r["baseline_auc_mean"], r["baseline_auc_std"]), pval(r["p_value"]),
                         pct(r["f1_macro_mean"])])
            subsets[f"{name}{label}"] = r["layer_subsets"]
    if rows:
        print("## tasks (Table 2)\n")
        table(["model", "ROC-AUC (%)", "dummy (%)", "p (paired t)", "macro F1 (%)"], rows)
        print("## tasks, block subsets (Table 5, k = 11)\n")
        names = list(subsets)
        out = []
        for key, label in [("first", "first only"), ("middle", "middle only"), ("last", "last only"),
                           ("first_middle_last", "first + middle + last"), ("all", "all")]:
            out.append([label] + [pct(subsets[n][key]["auc_mean"], subsets[n][key]["auc_std"]) for n in names])
        table(["subset"] + names, out)


def formats(root):
    rows = []
    for prefix in ["formats", "formats-256", "formats-tuned", "formats-256-tuned"]:
        for run, _ in MODELS:
            r = load(root, f"{prefix}-{run}")
            if r is None:
                continue
            a = r["per_alpha"]
            sig = " / ".join(f"{s['sigma_subset']:.3f}" for s in r["similarity"])
            ev = r["pca"]["explained_variance_ratio"]
            rows.append([f"{prefix}-{run}", str(r["tokens"])]
                        + [pct(a[k]["auc_mean"], a[k]["auc_std"]) for k in ["0.5", "1", "5"]]
                        + [pct(a["1"]["baseline_auc_mean"], a["1"]["baseline_auc_std"]),
                           pval(max(a[k]["p_value"] for k in a)), sig,
                           f"{100 * ev[0]:.0f} % + {100 * ev[1]:.0f} %"])
    if rows:
        print("## formats (Table 3)\n")
        table(["run", "tokens", "α = 0.5", "α = 1", "α = 5", "dummy", "largest p", "σ α = 0.5 / 1 / 5",
               "PC1 + PC2"], rows)


def mmlu(root):
    rows = []
    for run, r in each_model(root, "mmlu"):
        for style in ["base", "humble", "instruct"]:
            s = r["by_style"][style]
            rows.append([run, style.capitalize(), f"{pct(s['accuracy'])} ({s['n_correct']}/{s['n']})",
                         pct(s["auc_mean"], s["auc_std"]), pct(s["baseline_auc_mean"]), f"{s['p_value']:.2f}"])
    if rows:
        print("## mmlu (Table 4)\n")
        table(["model", "prompt", "LLM acc. (%)", "kNN AUC (%)", "dummy AUC", "p (paired t)"], rows)


def skip(root):
    rows = []
    for run, r in each_model(root, "skip"):
        c = r["curves"]
        rows.append([run, f"none: {100 * r['unskipped_accuracy']:.1f}",
                     " / ".join(str(b) for b in r["blocks_skipped"])]
                    + [" / ".join(f"{100 * v:.1f}" for v in c[k]) for k in ["expansion", "pruning", "random"]])
        tops = {k: max(range(len(v)), key=lambda i: v[i]) for k, v in r["top_block_counts"].items()}
        rows[-1].append(", ".join(f"{k} block {i + 1} ({r['top_block_counts'][k][i]})"
                                  for k, i in tops.items() if k != "random"))
    if rows:
        print("## skip (Figure 6), accuracy (%) at 10 / 20 / 30 / 40 / 50 % of blocks\n")
        table(["model", "unskipped", "blocks", "expansion", "pruning", "random", "most chosen block"], rows)


def family(root):
    r = load(root, "family")
    if r is None:
        return
    print("## family (Table 6)\n")
    size = "—" if r["f1_size_mean"] is None else pct(r["f1_size_mean"], r["f1_size_std"])
    table(["family macro F1 (%)", "size macro F1 (%)", "notes"],
          [[pct(r["f1_family_mean"], r["f1_family_std"]), size, "; ".join(r.get("notes", []))]])


def lenses(root):
    for run, _ in MODELS:
        path = os.path.join(root, "lenses", run, "train_report.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            r = json.load(f)
        lo, tu = r["kl_logit"], r["kl_tuned"]
        print(f"## lens {run}: {r['tokens_trained']:,} training tokens, {r['holdout_tokens']:,} held out\n")
        rows = [[str(i), f"{a:.2f}", f"{b:.2f}", f"{b / a:.2f}"] for i, (a, b) in enumerate(zip(lo, tu))]
        ml, mt = sum(lo) / len(lo), sum(tu) / len(tu)
        rows.append(["mean", f"{ml:.2f}", f"{mt:.2f}", f"{mt / ml:.2f}"])
        table(["layer", "KL logit", "KL tuned", "ratio"], rows)
        sha = os.path.join(root, "lenses", run, "params.pt.sha256")
        if os.path.exists(sha):
            print("sha256:", open(sha).read().split()[0], "\n")


def lens_budgets(root):
    """A model's lens trained again with another budget (root/lens-budget/<model>-<tokens>/), beside the page's lens
    on the same held-out tokens."""
    folder = os.path.join(root, "lens-budget")
    if not os.path.isdir(folder):
        return
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name, "train_report.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            r = json.load(f)
        base_path = os.path.join(root, "lenses", r["model"], "train_report.json")
        if not os.path.exists(base_path):
            continue
        with open(base_path) as f:
            base = json.load(f)
        lo, b, t = r["kl_logit"], base["kl_tuned"], r["kl_tuned"]
        n0, n1 = base["tokens_trained"], r["tokens_trained"]
        print(f"## lens budget {name}: {n1:,} training tokens against the page's {n0:,}, the same {r['holdout_tokens']:,} "
              "held-out tokens\n")
        rows = [[str(i), f"{a:.2f}", f"{x:.2f}", f"{y:.2f}", f"{x / a:.2f}", f"{y / a:.2f}"]
                for i, (a, x, y) in enumerate(zip(lo, b, t))]
        m = [sum(v) / len(v) for v in (lo, b, t)]
        rows.append(["mean", f"{m[0]:.2f}", f"{m[1]:.2f}", f"{m[2]:.2f}", f"{m[1] / m[0]:.2f}", f"{m[2] / m[0]:.2f}"])
        table(["layer", "KL logit", f"KL tuned, {n0:,}", f"KL tuned, {n1:,}", f"ratio, {n0:,}", f"ratio, {n1:,}"], rows)
        sha = os.path.join(folder, name, "params.pt.sha256")
        if os.path.exists(sha):
            print("sha256:", open(sha).read().split()[0], "\n")


def lens_methods(root):
    """The page's KL-from-zero lens beside the shortcut lens and KL training from the shortcut
    (root/lens-methods/<method>/<model>/, scripts/results-lens-methods.sh), on the same held-out tokens."""
    folder = os.path.join(root, "lens-methods")
    if not os.path.isdir(folder):
        return
    seconds = {}
    for path in (os.path.join(root, "timings.tsv"), os.path.join(folder, "timings.tsv")):
        if os.path.exists(path):
            for line in open(path):
                parts = line.rstrip("\n").split("\t")
                # A step timed again alone ("repeat: ...") is its clean time; else its first run.
                if len(parts) >= 4 and (parts[3].startswith("repeat") or
                                        (parts[3].startswith("done") and parts[0] not in seconds)):
                    seconds[parts[0]] = int(parts[1])
    for run, _ in MODELS:
        paths = [os.path.join(root, "lenses", run, "train_report.json")] + [
            os.path.join(folder, m, run, "train_report.json") for m in ("shortcut", "kl-from-shortcut")]
        if not all(os.path.exists(p) for p in paths):
            continue
        reports = [json.load(open(p)) for p in paths]
        lo = reports[0]["kl_logit"]
        cols = [r["kl_tuned"] for r in reports]
        names = [f"lens-{run}", f"lens-shortcut-{run}", f"lens-kl-from-shortcut-{run}"]
        head = [f"{lab}, {r['tokens_trained']:,} tok, {seconds.get(n, 0)} s"
                for lab, r, n in zip(("KL from zero", "shortcut", "KL from shortcut"), reports, names)]
        print(f"## lens methods {run}: held-out {reports[0]['holdout_tokens']:,} tokens\n")
        rows = [[str(i), f"{a:.2f}"] + [f"{c[i]:.2f}" for c in cols] for i, a in enumerate(lo)]
        means = [sum(v) / len(v) for v in [lo] + cols]
        rows.append(["mean"] + [f"**{m:.2f}**" for m in means])
        table(["layer", "logit lens"] + head, rows)


def step_seconds(path, until_done=False):
    """From a results.sh timings.tsv: seconds per step summed over resumes, step order, the repeats
    ((step, seconds, status) of lines run again only to time a step, not summed) and the steps that were
    stopped and resumed (their first line is not `done`).

    until_done: leave out a step's lines after its first `done` (a resumed script re-checking a finished
    step for a second or two), to compare two runs' work.
    """
    total, order, repeats, finished, resumed = {}, [], [], set(), set()
    with open(path) as f:
        for line in f:
            step, seconds, _, status = (line.rstrip("\n").split("\t") + ["", ""])[:4]
            if status.startswith("repeat"):
                repeats.append((step, int(seconds), status))
                continue
            if until_done and step in finished:
                continue
            if step not in total:
                order.append(step)
                total[step] = 0
                if not status.startswith("done"):
                    resumed.add(step)
            total[step] += int(seconds)
            if status.startswith("done"):
                finished.add(step)
    return total, order, repeats, resumed


def timings(root):
    """Wall time per step, summed over resumes (the scripts' timings.tsv, copied beside the runs); one table
    per script."""
    path = os.path.join(root, "timings.tsv")
    if not os.path.exists(path):
        return
    total, order, repeats, _ = step_seconds(path)
    for script, page, owns in PARTS:
        steps = [step for step in order if owns(step)]
        if not steps:
            continue
        print(f"## wall time per step of {script} (s, summed over resumes; {page})\n")
        rows = [[step, f"{total[step]:,}", f"{total[step] / 60:.0f} min"] for step in steps]
        t = sum(total[step] for step in steps)
        rows.append(["total", f"{t:,}", f"{t / 3600:.2f} h"])
        table(["step", "wall (s)", ""], rows)
        mine = [(st, sec, why) for st, sec, why in repeats if owns(st)]
        if mine:
            print("repeated only to time them (not in the total):\n")
            table(["step", "wall (s)", "", "why"], [[st, f"{sec:,}", f"{sec / 60:.0f} min", why] for st, sec, why in mine])


def reruns(root):
    """Later runs of results.sh checked against the page (scripts/results-rerun.py wrote root/rerun-*/).

    Each step's time up to its first `done` on both sides; where the page also timed a step again alone
    (a `repeat` line), that time is the page's, marked. A page step resumed over several starts is marked too:
    work between its last saved batch and the stop was done twice.
    """
    path = os.path.join(root, "timings.tsv")
    if not os.path.exists(path):
        return
    page, _, repeats, resumed = step_seconds(path, until_done=True)
    marks = {step: " (resumed)" for step in resumed}
    for step, seconds, _ in repeats:
        page[step] = seconds
        marks[step] = " (repeat, alone)"
    for folder in sorted(d for d in os.listdir(root) if d.startswith("rerun-")):
        rerun = os.path.join(root, folder)
        if not all(os.path.exists(os.path.join(rerun, n)) for n in ("timings.tsv", "identical.tsv")):
            continue
        total, order, _, _ = step_seconds(os.path.join(rerun, "timings.tsv"), until_done=True)
        same = {}
        with open(os.path.join(rerun, "identical.tsv")) as f:
            for line in f:
                step, compared, identical, how = (line.rstrip("\n").split("\t") + [""])[:4]
                same[step] = f"{identical} of {compared}" + (f": {how}" if how else "")
        for script, page_md, owns in PARTS:
            rows, both = [], []
            for step in order:
                if step not in same or not owns(step):
                    continue  # not finished (yet), or the other script's
                old, new = page.get(step), total[step]
                timed = bool(old) and bool(new)
                if timed:
                    both.append(step)
                rows.append([step, f"{old:,}{marks.get(step, '')}" if old is not None else "—", f"{new:,}",
                             f"{old / new:.2f}×" if timed else "", same[step]])
            if not rows:
                continue
            a, b = sum(page[s] for s in both), sum(total[s] for s in both)
            rows.append([f"total ({len(both)} of {len(rows)} steps timed in both)", f"{a:,}", f"{b:,}",
                         f"{a / b:.2f}×" if b else "", ""])
            print(f"## {folder}, {script}: wall time per step against the page's run ({page_md}); the files the page "
                  "commits, compared byte for byte\n")
            table(["step", "page (s)", "rerun (s)", "page ÷ rerun", "files identical"], rows)


# The lens study (issue 44): scripts/results-lens-convergence.sh, -reread.sh, -compare.sh, -collect.sh.
REFERENCE = "shortcut-65536"


def jload(*parts):
    path = os.path.join(*parts)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def ci(m, digits=2):
    """A WindowMean of compare-runs: mean [lo, hi]."""
    return f"{m['mean']:.{digits}f} [{m['ci95'][0]:.{digits}f}, {m['ci95'][1]:.{digits}f}]"


def signed_ci(m, digits=3):
    return f"{m['mean']:+.{digits}f} [{m['ci95'][0]:+.{digits}f}, {m['ci95'][1]:+.{digits}f}]"


def study_seconds(root):
    """Wall time per step of the lens study (docs/results/lens-study-timings.tsv), summed over resumes."""
    seconds = {}
    path = os.path.join(root, "lens-study-timings.tsv")
    if os.path.exists(path):
        for line in open(path):
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 2:
                seconds[parts[0]] = seconds.get(parts[0], 0) + int(parts[1])
    return seconds


def budget_key(name):
    """shortcut-4096-…, kl-16x1024-… → (method, tokens, seed suffix)."""
    parts = name.split("-")
    tokens = 1
    for x in parts[1].split("x"):
        tokens *= int(x)
    return (0 if parts[0] == "shortcut" else 1, tokens, "seed" in name)


def lens_convergence(root):
    """Held-out KL against the training budget (issue 44, item 2): every lens of lens-convergence/
    against the model's 65,536-token shortcut lens, window by window (compare/<lens>.json)."""
    folder = os.path.join(root, "lens-convergence")
    if not os.path.isdir(folder):
        return
    seconds = study_seconds(root)
    for run, label in MODELS:
        names = sorted((n for n in os.listdir(folder) if n.endswith(run) and "-formats-" not in n), key=budget_key)
        ref = f"{REFERENCE}-{run}"
        comparisons = {n: jload(folder, "compare", f"{n}.json") for n in names if n != ref}
        comparisons = {n: c for n, c in comparisons.items() if c is not None}
        if not comparisons:
            continue
        any_c = next(iter(comparisons.values()))
        print(f"## lens convergence {run}: held-out {any_c['windows']} windows of 512 tokens; mean KL over blocks "
              f"1 … L − 1, nats [95 % bootstrap CI over windows]\n")
        rows = [["logit lens", "", "", "", ci(any_c["logit_blocks"]), "", ""]]
        for n in names:
            report = jload(folder, n, "train_report.json")
            state = jload(folder, n, "train_state.json")
            short = n[: -len(run) - 1]
            if state is not None:
                o = state["options"]
                how = f"KL from {REFERENCE}: {len(state['losses'])} steps × {o['step_tokens']:,}, lr × {o['lr_scale']}"
                seed = str(o["seed"])
            else:
                how = "shortcut (closed form)"
                seed = "7" if "seed7" in n else "42"
            own = comparisons[n]["b_blocks"] if n in comparisons else any_c["a_blocks"]
            diff = signed_ci(comparisons[n]["difference_blocks"]) if n in comparisons else "(reference)"
            rows.append([short, how, f"{report['tokens_trained']:,}", seed, ci(own), diff,
                         f"{seconds[n]:,}" if n in seconds else ""])
        table(["lens", "method", "tokens", "seed", "mean KL, blocks 1 … L − 1", f"− {REFERENCE}", "wall (s)"], rows)
        small, mid = comparisons.get(f"shortcut-4096-{run}"), comparisons.get(f"shortcut-16384-{run}")
        if small is not None and mid is not None:
            d1 = small["difference_blocks"]["mean"] - mid["difference_blocks"]["mean"]
            d2 = mid["difference_blocks"]["mean"]
            print(f"shortcut drops over blocks 1 … L − 1: 4,096 → 16,384 tokens {d1:.3f} nats, 16,384 → 65,536 "
                  f"{d2:.3f} (ratio {d1 / d2:.1f}; the 1/N law of least squares predicts 4): at 65,536 tokens about "
                  f"{d2 / 3:.3f} nats above its asymptote\n")


def lens_convergence_layers(root):
    """Per layer, the logit lens, the 65,536-token shortcut lens and the longest KL training from it,
    each ± its bootstrap interval over held-out windows."""
    folder = os.path.join(root, "lens-convergence")
    if not os.path.isdir(folder):
        return
    for run, _ in MODELS:
        ref = jload(folder, f"{REFERENCE}-{run}", "train_report.json")
        if ref is None:
            continue
        kl = sorted((n for n in os.listdir(folder) if n.startswith("kl-") and n.endswith(run) and "seed" not in n),
                    key=budget_key)
        cols = [("logit lens", ref["kl_logit"], ref["kl_logit_ci95"]), (REFERENCE, ref["kl_tuned"], ref["kl_tuned_ci95"])]
        if kl:
            r = jload(folder, kl[-1], "train_report.json")
            cols.append((kl[-1][: -len(run) - 1], r["kl_tuned"], r["kl_tuned_ci95"]))
        print(f"## lens convergence by layer {run}: held-out KL, nats [95 % bootstrap CI]\n")
        rows = [[str(j)] + [f"{m[j]:.2f} [{c[j][0]:.2f}, {c[j][1]:.2f}]" for _, m, c in cols]
                for j in range(len(ref["kl_logit"]))]
        table(["layer"] + [name for name, _, _ in cols], rows)


def lens_indomain(root):
    """The in-domain shortcut lenses (scripts/results-lens-indomain.sh): fitted on the model's own formats
    generations for topics 51-100, held out on the last 8,192 tokens of them."""
    folder = os.path.join(root, "lens-convergence")
    if not os.path.isdir(folder):
        return
    seconds = study_seconds(root)
    for run, _ in MODELS:
        c = jload(folder, "compare", f"shortcut-formats-7680-{run}.json")
        if c is None:
            continue
        print(f"## lens in-domain {run}: held out {c['windows']} windows of 512 tokens of its own formats generations; "
              f"mean KL over blocks 1 … L − 1, nats [95 % bootstrap CI over windows]\n")
        rows = [["logit lens", "", ci(c["logit_blocks"]), "", ""]]
        for tokens, own, diff in (("7,680", c["b_blocks"], signed_ci(c["difference_blocks"])),
                                  ("30,720", c["a_blocks"], "(reference)")):
            name = f"shortcut-formats-{tokens.replace(',', '')}-{run}"
            rows.append([f"shortcut-formats-{tokens.replace(',', '')}", tokens, ci(own), diff,
                         f"{seconds[name]:,}" if name in seconds else ""])
        table(["lens", "tokens", "mean KL, blocks 1 … L − 1", "− shortcut-formats-30720", "wall (s)"], rows)


LENSES = ("logit", "shortcut", "indomain")


def reread_validate(root):
    """Table 1 and C2 through the logit and the shortcut lens, with ties handled, on the same prompts
    and generations (reread/validate-<lens>-<model>/), and C1 prompt by prompt (reread/compare/)."""
    folder = os.path.join(root, "reread")
    rows, tests = [], []
    for run, _ in MODELS:
        for lens in LENSES:
            r = jload(folder, f"validate-{lens}-{run}", "result.json")
            if r is None:
                continue
            t = r["c1_ties"]
            h, s = r["mean_entropy_by_block"], r["mean_top_p_count_by_block"]
            rows.append([run, lens, f"{r['c1_spearman']:.4f}", f"{t['kendall_tau_b']:.4f}",
                         f"{t['spearman_changed']:.4f}", f"{100 * t['unchanged_count_share']:.1f} %",
                         f"{r['c1_per_prompt_mean']:.3f} ± {r['c1_per_prompt_std']:.3f}",
                         f"{t['per_prompt_tau_b_mean']:.3f} ± {t['per_prompt_tau_b_std']:.3f}",
                         f"{r['c2_mean']:.3f}", f"{r['c2_mean_previous']:.3f}", f"{r['c2_mean_jaccard']:.3f}",
                         f"{sum(h) / len(h):.2f}", f"{sum(s) / len(s):.1f}"])
        for lens, name in (("shortcut", f"validate-{run}"), ("indomain", f"validate-indomain-{run}")):
            c = jload(folder, "compare", f"{name}.json")
            if c is None:
                continue
            for p in c["per_prompt"]:
                tests.append([run, lens, p["statistic"], str(p["prompts"]), f"{p['mean_a']:.3f}", f"{p['mean_b']:.3f}",
                              f"{p['mean_difference']:+.3f}", pval(p["p_value"])])
    if rows:
        print("## reread validate (Table 1, Figure 1)\n")
        table(["model", "lens", "ρ pooled", "τ-b pooled", "ρ, count changed", "count unchanged", "ρ per prompt",
               "τ-b per prompt", "C2 /\\|S_i\\|", "/\\|S_i−1\\|", "Jaccard", "mean H (nats)", "mean \\|S\\|"], rows)
    if tests:
        print("## reread C1 prompt by prompt (lens − logit lens, paired t-test over prompts)\n")
        table(["model", "lens", "statistic", "prompts", "logit lens", "lens", "difference", "p"], tests)


def reread_fit(root):
    """KL(final ‖ lens) and the calibration gap per block on validate's own tokens, both lenses, and the
    entropy profile they read (reread/validate-<lens>-<model>/result.json: lens_fit)."""
    folder = os.path.join(root, "reread")
    for run, _ in MODELS:
        found = [(lens, jload(folder, f"validate-{lens}-{run}", "result.json")) for lens in LENSES]
        found = [(lens, r) for lens, r in found if r is not None]
        if len(found) < 2:
            continue
        names = [lens for lens, _ in found]
        fits = [r["lens_fit"] for _, r in found]
        a = fits[0]
        print(f"## reread lens fit {run}: {a['n_prompts']} prompts, {a['n_tokens']:,} tokens, final entropy "
              f"{a['final_entropy']:.2f} nats; mean ± 95 % half-width over prompts\n")
        rows = []
        for j in range(len(a["mean_kl"])):
            row = [str(j + 1)]
            for f in fits:
                row += [f"{f['mean_entropy'][j]:.2f}", f"{f['mean_kl'][j]:.2f} ± {f['kl_ci95'][j]:.2f}",
                        f"{f['calibration_gap'][j]:+.2f} ± {f['gap_ci95'][j]:.2f}"]
            rows.append(row)
        table(["block"] + [f"{k} {lens}" for lens in names for k in ("H", "KL", "gap")], rows)


def reread_runs(root):
    """Every re-read run's result, in table order: (experiment, model run name, lens, result.json)."""
    folder = os.path.join(root, "reread")
    # formats-256-n25: the logit lens's formats runs with --kl at 25 prompts per format (their lens fit
    # and prediction depth only; Table 3 is read from the runs at 100).
    for exp in ("validate", "tasks", "formats-256", "formats-256-n25"):
        for run, _ in MODELS:
            for lens in LENSES:
                r = jload(folder, f"{exp}-{lens}-{run}", "result.json")
                if r is not None:
                    yield exp, run, lens, r


def reread_fit_summary(root):
    """The lens fit of every re-read run, over blocks 1 … L − 1: where each table's tokens stand."""
    rows = []
    for exp, run, lens, r in reread_runs(root):
        if "lens_fit" not in r:
            continue
        f = r["lens_fit"]
        n = len(f["mean_kl"]) - 1
        kl = sum(f["mean_kl"][:n]) / n
        gap = sum(f["calibration_gap"][:n]) / n
        h = sum(f["mean_entropy"][:n]) / n
        worst = min(f["calibration_gap"][:n])
        rows.append([exp, run, lens, f"{f['n_prompts']}", f"{f['n_tokens']:,}", f"{kl:.2f}", f"{gap:+.2f}",
                     f"{worst:+.2f} (block {f['calibration_gap'].index(worst) + 1})", f"{h:.2f}",
                     f"{f['final_entropy']:.2f}"])
    if rows:
        print("## reread lens fit, blocks 1 … L − 1 (means over blocks of the per-block means over prompts)\n")
        table(["experiment", "model", "lens", "prompts", "tokens", "mean KL", "mean gap", "most negative gap",
               "mean H", "final H"], rows)


FLAT_NATS = 0.05


def reread_shape(root):
    """The entropy profile's shape through the shortcut lens on validate's tokens, block by block, with the rule
    of docs/results-tuned-lens.md: a change of mean entropy between blocks j − 1 and j is read as expansion (rise)
    or pruning (fall) only where (a) the lens's held-out KL has flattened at both blocks (its distance to its own
    asymptote at 65,536 tokens, a third of the upper end of the 95 % interval of KL(16,384 tokens) − KL(65,536) by
    the 1/N law of least squares, below FLAT_NATS) and (b) the change is larger than the change of the
    calibration gap between the two blocks plus both gaps' 95 % half-widths (else the lens's miscalibration could
    make it); otherwise it is open."""
    folder = os.path.join(root, "reread")
    conv = os.path.join(root, "lens-convergence", "compare")
    # validate's tokens through both lenses; formats' (256 generated tokens) through the TinyStories shortcut.
    cases = [("validate", lens, smaller, run) for lens, smaller in
             (("shortcut", "shortcut-16384"), ("indomain", "shortcut-formats-7680")) for run, _ in MODELS]
    cases += [("formats-256", "shortcut", "shortcut-16384", run) for run, _ in MODELS]
    for exp, lens, smaller, run in cases:
        r = jload(folder, f"{exp}-{lens}-{run}", "result.json")
        # The lens at a quarter of its tokens, on the same held-out windows: the 1/N check.
        c = jload(conv, f"{smaller}-{run}.json")
        if r is None or c is None:
            continue
        f = r["lens_fit"]
        h, gap, gci = f["mean_entropy"], f["calibration_gap"], f["gap_ci95"]
        # Layer j of the held-out report is the residual after block j (layer 0 the embedding output); the last
        # block has no translator (exact).
        moved = [d["ci95"][1] for d in c["difference_by_layer"]] + [0.0]
        flat = [moved[j + 1] / 3 < FLAT_NATS for j in range(len(h))]
        # validate's sections keep their names; formats' say so.
        label = "" if exp == "validate" else "formats "
        print(f"## reread shape {label}{lens} {run}: {exp}'s {f['n_tokens']:,} tokens\n")
        rows = []
        for j in range(len(h)):
            if j == 0:
                rows.append(["1", f"{h[0]:.2f}", "", f"{gap[0]:+.2f} ± {gci[0]:.2f}", "", "yes" if flat[0] else "no",
                             ""])
                continue
            dh, dg = h[j] - h[j - 1], gap[j] - gap[j - 1]
            margin = abs(dg) + gci[j] + gci[j - 1]
            if not (flat[j] and flat[j - 1]):
                verdict = "open (lens not flat)"
            elif abs(dh) <= margin:
                verdict = "open (within the gap's change)"
            else:
                verdict = "expansion" if dh > 0 else "pruning"
            rows.append([str(j + 1), f"{h[j]:.2f}", f"{dh:+.2f}", f"{gap[j]:+.2f} ± {gci[j]:.2f}", f"{dg:+.2f}",
                         "yes" if flat[j] else "no", verdict])
        table(["block", "H", "ΔH", "gap", "Δgap", "KL flat", "reading of ΔH"], rows)
        # The profile's overall shape under the same rule: from block 1 to the highest block (before the last),
        # and from there to the lowest block after it.
        top = max(range(len(h) - 1), key=lambda j: h[j])
        low = min(range(top, len(h)), key=lambda j: h[j])
        spans = []
        for name, a, b in (("rise to the peak", 0, top), ("fall after the peak", top, low)):
            if a == b:
                continue
            dh, dg = h[b] - h[a], gap[b] - gap[a]
            margin = abs(dg) + gci[a] + gci[b]
            ok = all(flat[j] for j in range(a, b + 1))
            verdict = ("expansion" if dh > 0 else "pruning") if ok and abs(dh) > margin else "open"
            spans.append([name, f"{a + 1} → {b + 1}", f"{dh:+.2f}", f"{dg:+.2f}", f"{margin:.2f}", verdict])
        print(f"## reread shape spans {label}{lens} {run}\n")
        table(["span", "blocks", "ΔH", "Δgap", "margin", "reading"], spans)


def reread_tasks(root):
    folder = os.path.join(root, "reread")
    rows = []
    for run, label in MODELS:
        c = jload(folder, "compare", f"tasks-{run}.json")
        res = {lens: jload(folder, f"tasks-{lens}-{run}", "result.json") for lens in ("logit", "shortcut")}
        if c is None or any(v is None for v in res.values()):
            continue
        by_path = {s["path"]: s for s in c["scores"]}
        for lens in ("logit", "shortcut"):
            r = res[lens]
            cells = [pct(r["auc_mean"], r["auc_std"]), pct(r["f1_macro_mean"]), pval(r["p_value"])]
            cells += [pct(r["layer_subsets"][k]["auc_mean"], r["layer_subsets"][k]["auc_std"])
                      for k in ("first", "middle", "last", "first_middle_last", "all")]
            rows.append([label, lens] + cells)
        diff = ["shortcut − logit (p corrected)"]
        for path in ("knn", "layer_subsets.first", "layer_subsets.middle", "layer_subsets.last",
                     "layer_subsets.first_middle_last", "layer_subsets.all"):
            s = by_path[path]
            p = "n/a" if s["corrected_p_value"] is None else f"{s['corrected_p_value']:.2f}"
            diff.append(f"{100 * s['mean_difference']:+.2f} ({p})")
        rows.append([label, diff[0], diff[1], "", ""] + diff[2:])
    if rows:
        print("## reread tasks (Table 2, Table 5)\n")
        table(["model", "lens", "ROC-AUC (%)", "macro F1 (%)", "p (vs dummy)", "first", "middle", "last",
               "first + middle + last", "all"], rows)


def reread_formats(root):
    folder = os.path.join(root, "reread")
    rows = []
    for run, _ in MODELS:
        c = jload(folder, "compare", f"formats-256-{run}.json")
        res = {lens: jload(folder, f"formats-256-{lens}-{run}", "result.json") for lens in ("logit", "shortcut")}
        if res["shortcut"] is None:
            continue
        # The logit lens's formats run with --kl is not run yet: its committed run without --kl (the same
        # items, generations and folds; scripts/results-lens-compare.sh pairs them) is the twin.
        logit_from = "reread/"
        if res["logit"] is None:
            res["logit"] = jload(root, f"formats-256-{run}", "result.json")
            logit_from = f"formats-256-{run}/"
        for lens in ("logit", "shortcut"):
            r = res[lens]
            if r is None:
                continue
            where = logit_from if lens == "logit" else "reread/"
            rows.append([run, lens, where] + [pct(r["per_alpha"][a]["auc_mean"], r["per_alpha"][a]["auc_std"])
                                              for a in ("0.5", "1", "5")])
        if c is not None:
            by_path = {s["path"]: s for s in c["scores"]}
            cells = []
            for a in ("0.5", "1", "5"):
                s = by_path[f"per_alpha.{a}"]
                cells.append(f"{100 * s['mean_difference']:+.2f} ({s['corrected_p_value']:.2f})")
            rows.append([run, "shortcut − logit (p corrected)", ""] + cells)
    if rows:
        print("## reread formats (Table 3, 256 tokens)\n")
        table(["model", "lens", "run", "α = 0.5", "α = 1 (Shannon)", "α = 5"], rows)


def reread_depth(root):
    """Prediction depth (the first block from which the lens's top-1 is the model's own and stays so) of every
    re-read run, per class: mean ± sd over the measured tokens, and the share decided by the middle block."""
    rows = []
    for exp, run, lens, r in reread_runs(root):
        if not r.get("prediction_depth"):
            continue
        for d in r["prediction_depth"]:
            n_blocks = len(d["counts"]) - 1
            by_middle = sum(d["counts"][: n_blocks // 2]) / d["n"]
            at_last = d["counts"][n_blocks - 1] / d["n"]
            rows.append([exp, run, lens, d["label"], f"{d['n']:,}", f"{d['mean']:.2f} ± {d['std']:.2f}",
                         f"{100 * by_middle:.1f} %", f"{100 * at_last:.1f} %"])
    if rows:
        print("## reread prediction depth (block from which the lens's top-1 is the model's and stays; mean ± sd over "
              "tokens)\n")
        table(["experiment", "model", "lens", "class", "tokens", "depth", "decided by block L/2", "only at block L"],
              rows)


def components(root):
    """What each block's attention and MLP write, through the logit lens (docs/results/components/<model>.jsonl,
    scripts/results-components.sh): per block, means over the prompts' last positions of the entropy and of
    KL(final ‖ point) for the attention write, the MLP write and the residual after the block."""
    folder = os.path.join(root, "components")
    for run, _ in MODELS:
        path = os.path.join(folder, f"{run}.jsonl")
        if not os.path.exists(path):
            continue
        profiles = [json.loads(line) for line in open(path)]
        positions = [p for prof in profiles for p in prof["positions"]]
        n_blocks = profiles[0]["n_layers"]
        print(f"## components {run}: logit lens, last position of {len(profiles)} prompts; mean entropy H and "
              f"KL(final ‖ point), nats\n")
        rows = []
        for b in range(n_blocks):
            row = [str(b + 1)]
            for k in range(3):
                j = 3 * b + k
                h = sum(p["shannon"][j] for p in positions) / len(positions)
                kl = sum(p["kl_to_final"][j] for p in positions) / len(positions)
                row += [f"{h:.2f}", f"{kl:.2f}"]
            rows.append(row)
        table(["block", "H attention write", "KL attention write", "H MLP write", "KL MLP write", "H residual",
               "KL residual"], rows)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "docs/results"
    validate(root)
    validate(root, "-tuned")
    blocks(root)
    tasks(root)
    formats(root)
    mmlu(root)
    skip(root)
    family(root)
    lenses(root)
    lens_budgets(root)
    lens_methods(root)
    lens_convergence(root)
    lens_convergence_layers(root)
    lens_indomain(root)
    reread_validate(root)
    reread_fit(root)
    reread_fit_summary(root)
    reread_shape(root)
    reread_tasks(root)
    reread_formats(root)
    reread_depth(root)
    components(root)
    timings(root)
    reruns(root)


if __name__ == "__main__":
    main()
