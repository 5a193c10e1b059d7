#!/usr/bin/env python3
"""Drops the embedded plotly.js from an executed notebook (committed notebooks stay small; the HTML
report made from the unstripped notebook keeps one copy) and nbconvert's per-cell execution
timestamps.  Usage: strip-plotly.py IN.ipynb OUT.ipynb

plotly.js is marked by entropy-lens's display code between the two comments below. Charts in the
stripped notebook show their static SVG sketch on GitHub and become interactive when re-run."""
import json
import sys

BEGIN = "<!-- entropy-lens:plotly.js -->"
END = "<!-- /entropy-lens:plotly.js -->"
NOTE = "<!-- plotly.js omitted from the committed notebook: re-run it for interactive charts -->"


def strip(html):
    out, removed = html, 0
    while BEGIN in out:
        a = out.index(BEGIN)
        b = out.index(END, a) + len(END)
        out = out[:a] + NOTE + out[b:]
        removed += 1
    return out, removed


def main(src, dst):
    nb = json.load(open(src, encoding="utf-8"))
    removed = 0
    for cell in nb.get("cells", []):
        cell.get("metadata", {}).pop("execution", None)
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if "text/html" in data:
                html = data["text/html"]
                text = "".join(html) if isinstance(html, list) else html
                text, n = strip(text)
                removed += n
                data["text/html"] = text.splitlines(keepends=True)
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(nb, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{dst}: removed {removed} embedded plotly.js")


if __name__ == "__main__":
    main(*sys.argv[1:3])
