#!/usr/bin/env python3
"""The README's speed table from `turbokv bench compare` reports.

Usage: scripts/compare-table.py [--out FILE] LABEL=REPORT_DIR_OR_JSON ...

Each argument names a row group ("Llama 3.2 1B shape, Q4_K_M") and the
report.json (or the --out directory holding it) of one `bench compare`
run. Prints a Markdown table with, per metric, each engine's median tok/s
and the ratio turbokv / llama.cpp as the median and min-max over the
pairs, so the README's figures are the reports' own.
"""
import argparse
import json
import os
import sys

METRICS = [("prefill", "prefill {p} tokens"), ("decode", "decode at depth 0"),
           ("decode_deep", "decode at depth {d}")]


def load(path):
    if os.path.isdir(path):
        path = os.path.join(path, "report.json")
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        return report["compare"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"compare-table: {path}: not a bench compare report ({e})")


def rows(label, compare):
    opts = compare.get("options", {})
    out = []
    for key, name in METRICS:
        s = compare["summary"].get(key)
        if not s or not s.get("ratio", {}).get("n"):
            continue
        r = s["ratio"]
        metric = name.format(p=opts.get("prompt_tokens", "?"), d=opts.get("depth", "?"))
        out.append(f"| {label}: {metric}, tok/s | {s['llama_cpp']['median']:.1f} | "
                   f"{s['turbokv']['median']:.1f} | {r['median']:.2f}x "
                   f"({r['min']:.2f}-{r['max']:.2f}x, {r['n']} pairs) |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="")
    ap.add_argument("groups", nargs="+", metavar="LABEL=REPORT")
    a = ap.parse_args()
    lines = ["| | llama.cpp | turbokv | turbokv / llama.cpp: median (min-max) |",
             "|---|---|---|---|"]
    for g in a.groups:
        label, sep, path = g.partition("=")
        if not sep or not label or not path:
            sys.exit(f"compare-table: expected LABEL=REPORT, got '{g}'")
        lines += rows(label, load(path))
    text = "\n".join(lines) + "\n"
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
