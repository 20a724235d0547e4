#!/usr/bin/env python3
"""Plots bench/peers/run.sh results: best tokens/s per engine and case, one
panel per run (e.g. the idle machine and the busy neighbour), log scale.

    plot.py --out FILE.png LABEL=results.jsonl [LABEL=results.jsonl ...]
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ENGINES = [  # (engine, dtype, legend, colour)
    ("td", "float32", "transformerd f32", "#1f5fa8"),
    ("ct2", "float32", "CTranslate2 f32", "#e08a2c"),
    ("td", "int8", "transformerd int8", "#6fa8e0"),
    ("td", "int8-all", "transformerd int8-all", "#a9cdef"),
    ("ct2", "int8", "CTranslate2 int8", "#f2c48d"),
    ("td", "bfloat16", "transformerd bf16", "#7b4fa0"),
    ("hf", "float32", "transformers f32", "#5a9e4b"),
    ("ct21", "float32", "CTranslate2 f32, 1 thread", "#b05a10"),
    ("ct21", "int8", "CTranslate2 int8, 1 thread", "#c9a06a"),
    ("td1", "float32", "transformerd f32, 1 thread", "#2a6f97"),
    ("td1", "int8", "transformerd int8, 1 thread", "#8fbcd4"),
    ("td1", "int8-all", "transformerd int8-all, 1 thread", "#bcd9e6"),
    ("tdb", "float32", "transformerd f32 before", "#8c8c8c"),
    ("tdb", "int8", "transformerd int8 before", "#c8c8c8"),
]
MODELS = {"ende": "bundled en-de", "base": "transformer-base shape"}

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("runs", nargs="+", help="LABEL=results.jsonl")
a = ap.parse_args()

panels = []
for spec in a.runs:
    label, _, path = spec.partition("=")
    best, meta = {}, {}
    for line in open(path):
        r = json.loads(line)
        case = (r["model"], r["run"]["batch"], r["run"]["beam"])
        k = (case, r["engine"], r["dt"])
        best[k] = max(best.get(k, 0.0), r["run"]["tokens_per_s"])
        if r["engine"] == "td":
            meta["threads"] = r["run"].get("threads", "?")
    panels.append((label, best, meta))

fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.6), squeeze=False,
                         sharey=True)
for ax, (label, best, meta) in zip(axes[0], panels):
    cases = sorted({k[0] for k in best}, key=lambda c: (c[0] != "ende", -c[1]))
    engines = [e for e in ENGINES if any((c, e[0], e[1]) in best for c in cases)]
    width = 0.8 / max(len(engines), 1)
    for i, (eng, dt, legend, colour) in enumerate(engines):
        xs, ys = [], []
        for j, c in enumerate(cases):
            v = best.get((c, eng, dt))
            if v:
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(v)
        ax.bar(xs, ys, width, label=legend, color=colour, edgecolor="black", linewidth=0.4)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([f"{MODELS.get(m, m)}\nbatch {b}, beam {bm}" for m, b, bm in cases],
                       fontsize=8)
    ax.set_yscale("log")
    ax.set_title(f"{label} ({meta.get('threads')} threads), best of the rounds", fontsize=10)
    ax.grid(axis="y", which="both", alpha=0.3)
axes[0][0].set_ylabel("generated tokens / s")
axes[0][-1].legend(fontsize=7, loc="upper right")
fig.tight_layout()
fig.savefig(a.out, dpi=110)
