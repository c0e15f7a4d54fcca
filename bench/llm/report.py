#!/usr/bin/env python3
"""Table of a bench/llm/run.sh result file: medians over rounds with the
lowest and highest, ours / llama.cpp, and the bandwidth ceiling."""
import collections
import json
import statistics
import sys


def fmt(xs):
    return f"{statistics.median(xs):8.1f} ({min(xs):.1f}-{max(xs):.1f})"


def main(path):
    bw, ours, llama = {}, collections.defaultdict(lambda: collections.defaultdict(list)), \
        collections.defaultdict(lambda: collections.defaultdict(list))
    for line in open(path):
        r = json.loads(line)
        if r["kind"] == "bandwidth":
            bw[r["threads"]] = r["gb_per_s"]
            continue
        key = (r["model"], r["threads"])
        if r["kind"] == "ours":
            o = r["result"]
            ours[key]["pp"].append(o["prefill_tokens_per_s"])
            ours[key]["tg"].append(o["decode_tokens_per_s"])
            ours[key]["load_ms"].append(o["load_ms"])
            ours[key]["bytes"].append(o["decode_bytes"])
        else:
            for t in r["result"]:
                llama[key]["pp" if t["n_gen"] == 0 else "tg"].append(t["avg_ts"])
    print("streaming bandwidth: " + ", ".join(f"{t} thread{'s' if t > 1 else ''} {g:.1f} GB/s" for t, g in sorted(bw.items())))
    print(f"{'model':18} {'thr':>3}  {'prefill ours':>22} {'prefill llama.cpp':>22} {'ratio':>5}  "
          f"{'decode ours':>22} {'decode llama.cpp':>22} {'ratio':>5}  {'ceiling':>7} {'of ceil':>7} {'load ms':>7}")
    for key in sorted(ours):
        o, l = ours[key], llama.get(key, {})
        ceiling = bw.get(key[1], 0) * 1e9 / statistics.median(o["bytes"])
        pr = statistics.median(o["pp"]) / statistics.median(l["pp"]) if l.get("pp") else float("nan")
        tr = statistics.median(o["tg"]) / statistics.median(l["tg"]) if l.get("tg") else float("nan")
        print(f"{key[0]:18} {key[1]:>3}  {fmt(o['pp']):>22} {fmt(l['pp']) if l.get('pp') else '-':>22} {pr:5.2f}  "
              f"{fmt(o['tg']):>22} {fmt(l['tg']) if l.get('tg') else '-':>22} {tr:5.2f}  {ceiling:7.1f} "
              f"{100 * statistics.median(o['tg']) / ceiling:6.0f}% {statistics.median(o['load_ms']):7.1f}")


if __name__ == "__main__":
    main(sys.argv[1])
