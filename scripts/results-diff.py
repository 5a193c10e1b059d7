#!/usr/bin/env python3
"""What changed between two sets of experiment results.

Usage: scripts/results-diff.py OLD_DIR NEW_DIR [--top N]

OLD_DIR and NEW_DIR hold one folder per run (e.g. docs/results and runs/paper); for every run
folder present in both with a result.json, prints how many values are identical, every changed
number outside lists (the headline values a page quotes), and for numbers inside lists (profiles,
points, samples) how many moved, the N that moved most, and how many only changed sign. A list
whose length changed is reported as such. Standard library only.
"""
import argparse
import json
import math
import pathlib


def leaves(obj, path=""):
    """Yields (path, value) for every number, string and list length in a JSON value."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from leaves(value, f"{path}.{key}" if path else key)
    elif isinstance(obj, list):
        yield f"{path}#len", len(obj)
        for i, value in enumerate(obj):
            yield from leaves(value, f"{path}[{i}]")
    else:
        yield path, obj


def number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def compare(old, new, top):
    a = dict(leaves(old))
    b = dict(leaves(new))
    same = 0
    headline = []  # changed numbers outside lists: the values a page quotes
    moved = []  # (absolute change, path, old, new) of numbers inside lists
    flipped = 0  # list numbers that only changed sign (a principal axis may point either way)
    other = []  # non-numeric differences and leaves present on one side only
    for path in sorted(set(a) | set(b)):
        if path not in a or path not in b:
            other.append(f"{path}: only in {'new' if path in b else 'old'}")
            continue
        x, y = a[path], b[path]
        if x == y or (number(x) and number(y) and math.isnan(x) and math.isnan(y)):
            same += 1
        elif number(x) and number(y):
            if "[" not in path:
                headline.append((path, x, y))
            elif abs(x + y) <= 1e-3 * max(abs(x), abs(y)) + 1e-4:
                flipped += 1
            else:
                moved.append((abs(y - x), path, x, y))
        else:
            other.append(f"{path}: {x!r} -> {y!r}")
    moved.sort(reverse=True)
    total = same + len(headline) + len(moved) + flipped + len(other)
    print(f"  {same} of {total} values identical")
    for path, x, y in headline:
        print(f"    {path}: {x:.10g} -> {y:.10g} (change {y - x:+.3g})")
    if moved:
        print(f"  {len(moved)} numbers in lists moved, by at most {moved[0][0]:.3g}:")
        for change, path, x, y in moved[:top]:
            print(f"    {path}: {x:.10g} -> {y:.10g}")
    if flipped:
        print(f"  {flipped} numbers in lists changed sign (to 1e-3; e.g. a principal axis reversed)")
    for line in other[:top]:
        print(f"    {line}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=pathlib.Path)
    parser.add_argument("new", type=pathlib.Path)
    parser.add_argument("--top", type=int, default=5, help="numbers to list per run (default 5)")
    args = parser.parse_args()
    runs = sorted(
        p.parent.name
        for p in args.new.glob("*/result.json")
        if (args.old / p.parent.name / "result.json").is_file()
    )
    if not runs:
        raise SystemExit(f"no run folder with a result.json in both {args.old} and {args.new}")
    for run in runs:
        print(run)
        with open(args.old / run / "result.json") as f:
            old = json.load(f)
        with open(args.new / run / "result.json") as f:
            new = json.load(f)
        compare(old, new, args.top)


if __name__ == "__main__":
    main()
