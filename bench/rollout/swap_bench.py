#!/usr/bin/python3
"""Hot-swap benchmark: how long each phase of a swap takes (load and warm-up,
verify, swap, drain) and what swaps do to the latency clients see.

    swap_bench.py SERVER_BIN MCPCTL_BIN OUTDIR MODEL.onnx[:INPUT.npy] ...

For each model: a server with that model's folder as a model root
(--keep-previous false, so every swap drains the replaced version), a steady
run of `mcpctl bench` (concurrency CONCURRENCY for DURATION), then the same
run while SWAPS versions are applied in a row, spread over it, alternating
v1.0.0 and v1.1.0; then PHASE_SWAPS more swaps, each followed by reading
its phases from the version's lifecycle (the server notes
"loaded and warmed in X ms, verified in Y us, swapped in Z us" on Ready, and
the drain is Draining -> Unloaded). The two runs alternate ROUNDS times
(steady, swaps, steady, swaps, ...): medians with their ranges are reported.
Prints one table; writes OUTDIR/rollout-<model>.json.
"""
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

DURATION = os.environ.get("BENCH_DURATION", "5s")
CONCURRENCY = os.environ.get("BENCH_CONCURRENCY", "8")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SWAPS = int(os.environ.get("BENCH_SWAPS", "100"))  # per run, spread evenly over it
PHASE_SWAPS = int(os.environ.get("BENCH_PHASE_SWAPS", "20"))  # per round, timed one by one after the run
READY = re.compile(r"loaded and warmed in ([0-9.]+) ms, verified in ([0-9.]+) us.*swapped in ([0-9.]+) us")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def call(url, method="GET", body=None, timeout=600):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read() or b"null")


def descriptor(name, path, version):
    return f"name: {name}\nversion: {version}\nformat: onnx\npath: {path}\nmax_batch_size: 0\n"


def bench(mcpctl, url, name, npy):
    args = [mcpctl, "bench", name, "--server", url, "--concurrency", CONCURRENCY, "--duration", DURATION, "--json"]
    if npy:
        args += ["--input", f"input={npy}"] if "digits" in name else ["--input", f"{npy_input_name(url, name)}={npy}"]
    p = subprocess.run(args, capture_output=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.decode())
    level = json.loads(p.stdout)["levels"][0]
    return level


def npy_input_name(url, name):
    return call(f"{url}/v2/models/{name}")["inputs"][0]["name"]


def swap_phases(url, name, version, since_ms):
    """The Ready note of `version` after since_ms, and the drain of the version it replaced."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        life = call(f"{url}/v2/repository/models/{name}")["lifecycle"]
        ready = [x for x in life if x["version"] == version and x["state"] == "ready" and x["time_ms"] >= since_ms]
        other = [x for x in life if x["version"] != version and x["time_ms"] >= since_ms]
        drain = [x for x in other if x["state"] == "draining"]
        gone = [x for x in other if x["state"] == "unloaded"]
        if ready and drain and gone:
            m = READY.search(ready[-1]["reason"])
            if m:
                return (float(m.group(1)), float(m.group(2)), float(m.group(3)),
                        float(gone[-1]["time_ms"] - drain[-1]["time_ms"]))
        time.sleep(0.005)
    raise RuntimeError(f"no lifecycle for the swap to {version}")


def run_model(server, mcpctl, outdir, model, npy, tmp):
    name = os.path.splitext(os.path.basename(model))[0]
    root = os.path.join(tmp, name)
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, os.path.basename(model))
    shutil.copy(model, path)
    port = free_port()
    log = open(os.path.join(tmp, f"{name}.log"), "w")
    proc = subprocess.Popen([server, "--model-root", root, "--port", str(port), "--grpc-port", "0",
                             "--keep-previous", "false", "--log-level", "warn"], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                call(f"{url}/v2/health/live")
                break
            except OSError:
                time.sleep(0.1)
        load = f"{url}/v2/repository/models/{name}/load"
        call(load, "POST", {"parameters": {"config": descriptor(name, path, "v1.0.0")}})
        steady, during, phases, wall = [], [], [], []
        for _ in range(ROUNDS):
            steady.append(bench(mcpctl, url, name, npy))
            stop = threading.Event()
            swaps = []

            seconds = float(DURATION.rstrip("s"))
            gap = seconds / (SWAPS + 10)

            def swapper():
                versions = ["v1.1.0", "v1.0.0"]
                i = 0
                time.sleep(gap * 5)
                while not stop.is_set() and i < SWAPS:  # bounded
                    v = versions[i % 2]
                    t_next = time.monotonic() + gap
                    t0 = time.monotonic()
                    call(load, "POST", {"parameters": {"config": descriptor(name, path, v)}})
                    wall.append((time.monotonic() - t0) * 1e3)
                    swaps.append(v)
                    i += 1
                    time.sleep(max(0.0, t_next - time.monotonic()))

            t = threading.Thread(target=swapper, daemon=True)
            t.start()
            during.append(bench(mcpctl, url, name, npy))
            stop.set()
            t.join(600)
            during[-1]["swaps"] = len(swaps)
            # The phases, in a pass of their own: reading the lifecycle after
            # each swap would add its own requests to the measured run.
            current = swaps[-1] if swaps else "v1.0.0"
            for i in range(PHASE_SWAPS):
                v = "v1.0.0" if current == "v1.1.0" else "v1.1.0"
                since = int(time.time() * 1000) - 1
                call(load, "POST", {"parameters": {"config": descriptor(name, path, v)}})
                phases.append(swap_phases(url, name, v, since))
                current = v
                time.sleep(0.02)
        return {"model": name, "steady": steady, "during_swaps": during,
                "phases_ms": [{"load": p[0], "verify": p[1] / 1e3, "swap": p[2] / 1e3, "drain": p[3]} for p in phases],
                "apply_call_ms": wall}
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main(argv):
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    server, mcpctl, outdir = argv[1:4]
    os.makedirs(outdir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="mcp-bench-rollout-")
    rows = []
    try:
        for spec in argv[4:]:
            model, _, npy = spec.partition(":")
            res = run_model(server, mcpctl, outdir, model, npy or None, tmp)
            with open(os.path.join(outdir, f"rollout-{res['model']}.json"), "w") as f:
                json.dump(res, f, indent=1)
            rows.append(res)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"hot swaps: concurrency {CONCURRENCY}, {DURATION} per run, {ROUNDS} rounds (steady and during swaps alternate)")
    print(f"{'model':<12} {'swaps':>5} {'load+warm ms':>16} {'verify ms':>10} {'swap ms':>9} {'drain ms':>13} "
          f"{'p99 steady us':>20} {'p99 swaps us':>20} {'ratio':>6} {'errors':>6}")
    for r in rows:
        ph = r["phases_ms"]

        def span(key):
            xs = [p[key] for p in ph]
            return f"{med(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})" if key in ("verify", "swap") else \
                f"{med(xs):.1f} ({min(xs):.0f}-{max(xs):.0f})"

        ps = [x["p99_us"] for x in r["steady"]]
        pd = [x["p99_us"] for x in r["during_swaps"]]
        errors = sum(x["errors"] for x in r["during_swaps"])
        print(f"{r['model']:<12} {len(ph):>5} {span('load'):>16} {med([p['verify'] for p in ph]):>10.4f} "
              f"{med([p['swap'] for p in ph]):>9.3f} {span('drain'):>13} "
              f"{med(ps):>9.0f} ({min(ps):.0f}-{max(ps):.0f}) {med(pd):>9.0f} ({min(pd):.0f}-{max(pd):.0f}) "
              f"{med(pd) / med(ps):>6.2f} {errors:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
