#!/usr/bin/env python3
"""One mixture-of-experts layer, turbokv beside llama.cpp's ggml, side by side.

turbokv's layer is benchmarks/model/bench_moe (model/moe.h: router, routing,
each chosen expert's gate, up and down products, SwiGLU, the weighted sum).
llama.cpp's is benchmarks/peers/moe_layer_ggml.cc, compiled here against a
llama.cpp checkout and build: the same layer as llama.cpp's build_moe_ffn
builds it for qwen3moe (router product, softmax, top-k, normalized weights,
three MUL_MAT_ID, SwiGLU, the weighted sum), its experts in llama.cpp's
repacked CPU buffer where it has one for the type, as when it loads a model.
Both run the same shapes and types at the same thread count, one process
at a time, interleaved pair by pair; the table gives each engine's median
ms per layer and llama.cpp / turbokv.

Usage: scripts/moe-layer-llama.py --llama-src DIR --llama-bin DIR
           [--bench build/release/benchmarks/model/bench_moe] [-t N]
           [--pairs N] [--seconds S] [--cases SHAPE/TYPE/ROWS,...] [--out FILE.md]
Python 3 standard library and a C++ compiler (c++ or g++).
"""
import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CASES = ("qwen3-30b-a3b/q4_K/1,qwen3-30b-a3b/q4_K/8,qwen3-30b-a3b/q4_K/512,"
                 "qwen3-30b-a3b/q8_0/1,qwen3-30b-a3b/q8_0/8,qwen3-30b-a3b/q8_0/512,"
                 "gpt-oss-20b/mxfp4/1,gpt-oss-20b/mxfp4/8,gpt-oss-20b/mxfp4/512")


def fail(msg):
    sys.exit("moe-layer-llama: " + msg)


def run(argv, env=None):
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        fail("%s failed (exit %d): %s" % (argv[0], p.returncode, (p.stderr or p.stdout).strip()[-400:]))
    return p.stdout


def peer_compiler(src, bindir):
    """The compiler and include folder for the ggml layer, or a refusal."""
    inc = os.path.join(src, "ggml", "include")
    if not os.path.isfile(os.path.join(inc, "ggml.h")):
        fail("%s has no ggml/include/ggml.h: --llama-src is llama.cpp's source root" % src)
    if not os.path.isdir(bindir) or not any(f.startswith("libggml-cpu") for f in os.listdir(bindir)):
        fail("%s has no libggml-cpu: --llama-bin is the folder of llama.cpp's built tools" % bindir)
    cxx = shutil.which("c++") or shutil.which("g++")
    if not cxx:
        fail("no C++ compiler (c++ or g++) on PATH")
    return cxx, inc


def compile_peer(cxx, inc, bindir, out):
    run([cxx, "-O2", "-std=c++17", os.path.join(ROOT, "benchmarks", "peers", "moe_layer_ggml.cc"),
         "-I" + inc, "-L" + bindir, "-lggml", "-lggml-base", "-lggml-cpu",
         "-Wl,-rpath," + os.path.abspath(bindir), "-o", out])


def turbokv_ms(bench, case, threads, seconds):
    shape, typ, rows = case
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        env = dict(os.environ, TKV_BENCH_THREADS=str(threads))
        run([bench, "--benchmark_filter=^%s/%s/%s$" % (shape, typ, rows),
             "--benchmark_min_time=%g" % seconds, "--benchmark_out=" + f.name,
             "--benchmark_out_format=json"], env)
        data = json.load(open(f.name))
    runs = [b for b in data["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
    if not runs:
        fail("bench_moe ran no case %s/%s/%s" % case)
    b = runs[0]
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
    return b["real_time"] * scale


def llama_ms(peer, case, threads, seconds):
    shape, typ, rows = case
    out = run([peer, shape, typ, rows, str(threads), str(seconds)])
    m = re.search(r"ms=([0-9.]+) buffer=(\S+)", out)
    if not m:
        fail("unexpected output from moe_layer_ggml: " + out.strip())
    return float(m.group(1)), m.group(2)


def machine():
    try:
        for line in run(["lscpu"]).splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except SystemExit:
        pass
    return "unknown"


def commit(path):
    try:
        return run(["git", "-C", path, "rev-parse", "--short", "HEAD"]).strip()
    except SystemExit:
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-src", required=True, help="llama.cpp's source root")
    ap.add_argument("--llama-bin", required=True, help="folder of llama.cpp's built tools and libraries")
    ap.add_argument("--bench", default=os.path.join(ROOT, "build/release/benchmarks/model/bench_moe"))
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0, help="timed seconds per run")
    ap.add_argument("--cases", default=DEFAULT_CASES)
    ap.add_argument("--out", help="write the table (markdown) here too")
    a = ap.parse_args()
    if not os.access(a.bench, os.X_OK):
        fail("%s is not built (cmake --build build/release --target bench_moe)" % a.bench)
    if a.threads < 1 or a.pairs < 1 or a.seconds <= 0:
        fail("--threads, --pairs and --seconds must be positive")
    cases = []
    for c in a.cases.split(","):
        parts = c.strip().split("/")
        if len(parts) != 3 or not parts[2].isdigit():
            fail("a case is SHAPE/TYPE/ROWS, e.g. qwen3-30b-a3b/q4_K/1; got '%s'" % c)
        cases.append(tuple(parts))

    cxx, inc = peer_compiler(a.llama_src, a.llama_bin)
    tmp = tempfile.mkdtemp(prefix="moe-layer-")
    peer = os.path.join(tmp, "moe_layer_ggml")
    print("compiling the ggml layer against %s ..." % a.llama_bin, file=sys.stderr)
    compile_peer(cxx, inc, a.llama_bin, peer)
    rows_out = []
    for case in cases:
        tk, ll, buf = [], [], "?"
        for p in range(a.pairs):
            print("%s pair %d/%d ..." % ("/".join(case), p + 1, a.pairs), file=sys.stderr)
            tk.append(turbokv_ms(a.bench, case, a.threads, a.seconds))
            ms, buf = llama_ms(peer, case, a.threads, a.seconds)
            ll.append(ms)
        ratios = sorted(l / t for l, t in zip(ll, tk))
        rows_out.append((case, statistics.median(tk), statistics.median(ll), buf,
                         statistics.median(ratios), ratios[0], ratios[-1]))
    shutil.rmtree(tmp, ignore_errors=True)

    env = " ".join("%s=%s" % (k, os.environ[k]) for k in ("TURBOKV_SIMD", "TURBOKV_VNNI")
                   if os.environ.get(k))
    lines = [
        "# One MoE layer: turbokv beside llama.cpp's ggml",
        "",
        "- command: `%sscripts/moe-layer-llama.py --llama-src %s --llama-bin %s -t %d --pairs %d --seconds %g`"
        % (env + " " if env else "", a.llama_src, a.llama_bin, a.threads, a.pairs, a.seconds),
        "- machine: `lscpu` model name \"%s\", %d threads each" % (machine(), a.threads),
        "- turbokv %s, llama.cpp %s; %s" % (commit(ROOT), commit(a.llama_src),
                                           datetime.date.today().isoformat()),
        "",
        "| shape | type | rows | turbokv ms | llama.cpp ms (weights buffer) | llama.cpp / turbokv (min-max) |",
        "|---|---|---|---|---|---|",
    ]
    for (shape, typ, rows), t, l, buf, r, lo, hi in rows_out:
        lines.append("| %s | %s | %s | %.3f | %.3f (%s) | %.2fx (%.2f-%.2f) |"
                     % (shape, typ, rows, t, l, buf, r, lo, hi))
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
