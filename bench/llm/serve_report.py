#!/usr/bin/env python3
"""Prints bench/llm/serve.sh's results: per concurrency level, ours and
llama-server side by side (medians over the rounds, [lowest..highest]),
the ratio, and the prefix-cache part."""
import json
import statistics
import sys


def fmt(vals, unit=""):
    if not vals:
        return "-"
    return "%.1f%s [%.1f..%.1f]" % (statistics.median(vals), unit, min(vals), max(vals))


def main(path):
    runs = [json.loads(line) for line in open(path) if line.strip()]
    by = {}
    for r in runs:
        if r["kind"] not in ("ours", "llama"):
            continue
        for lv in r["result"]["levels"]:
            by.setdefault((lv["concurrency"], r["kind"]), []).append(lv)
    model = next((r["model"] for r in runs if "model" in r), "?")
    threads = next((r["threads"] for r in runs if "threads" in r), "?")
    print(f"model {model}, {threads} threads; medians over rounds [lowest..highest]")
    print("%-5s %-6s %24s %24s %24s %24s %22s %22s %7s" % ("conc", "engine", "tok/s (all streams)", "decode tok/s",
                                                            "ttft p50 ms", "ttft p99 ms", "itl p50 ms", "itl p99 ms",
                                                            "errors"))
    levels = sorted({c for c, _ in by})
    med = {}
    for c in levels:
        for e in ("ours", "llama"):
            lv = by.get((c, e), [])
            keys = ("tokens_per_s", "decode_tokens_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms")
            for k in keys:
                med[(c, e, k)] = statistics.median([x[k] for x in lv]) if lv else float("nan")
            print("%-5d %-6s %24s %24s %24s %24s %22s %22s %7d" % (
                c, "ours" if e == "ours" else "llama", *(fmt([x[k] for x in lv]) for k in keys),
                sum(x["errors"] for x in lv)))
        print("%-5d %-6s %24.2f %24.2f %24.2f %24.2f %22.2f %22.2f" % (
            c, "ratio", *(med[(c, "ours", k)] / med[(c, "llama", k)] if med[(c, "llama", k)] else float("nan")
                         for k in keys)))
    for e in ("ours", "llama"):
        if (1, e) in by and (8, e) in by:
            print("%s: 8 streams / 1 stream: %.2fx aggregate, %.2fx decode" % (
                e, med[(8, e, "tokens_per_s")] / med[(1, e, "tokens_per_s")],
                med[(8, e, "decode_tokens_per_s")] / med[(1, e, "decode_tokens_per_s")]))
    prefix = [r for r in runs if r["kind"] == "prefix"]
    if prefix:
        print("prefix cache (one long prompt; tenant, TTFT ms):",
              ", ".join("%s %.1f" % (r["tenant"], r["result"]["ttft_ms"]) for r in prefix))
    stats = [r for r in runs if r["kind"] == "stats"]
    if stats:
        g = stats[-1]["result"]["model_stats"][0]["generation"]
        print("prefix cache counters: %d of %d prompt blocks reused (hit ratio %.2f), %d cached blocks, %d evictions"
              % (g["prefix_cache"]["hits"], g["prefix_cache"]["queries"], g["prefix_cache"]["hit_ratio"],
                 g["kv_cache"]["cached_blocks"], g["kv_cache"]["evictions"]))


if __name__ == "__main__":
    main(sys.argv[1])
