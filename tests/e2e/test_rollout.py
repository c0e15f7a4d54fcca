"""Hot swaps under load: 50 clients send requests without pause while a
model is applied 100 times in a row, alternating two versions. No request
fails, and every answer carries a version that was current at some moment
between the request's sending and its answer.

Run by ctest (tests/e2e/CMakeLists.txt), one entry per class."""
import os
import threading
import time
import unittest

import requests

import test_server as ts


def setUpModule():
    ts.setUpModule()


def tearDownModule():
    ts.tearDownModule()


class HotSwapTests(ts.TempModelsTestCase):
    CLIENTS = 50
    SWAPS = 100

    def test_100_swaps_under_50_clients(self):
        stop = threading.Event()
        threads = []
        try:
            server = self.start("--model-root", self.models, "--max-queue-size", 4096)
            versions = ["v1.0.0", "v1.1.0"]

            def apply(version):
                t0 = time.monotonic()
                r = self.apply(server, "digits", ts.digits_descriptor("digits", self.model, version=version))
                self.assertEqual(r.status_code, 200, r.text)
                return t0, time.monotonic()

            apply(versions[0])
            body = ts.digits_v2_body()
            results = [[] for _ in range(self.CLIENTS)]
            failures = []

            def client(out):
                s = requests.Session()
                url = server.url + "/v2/models/digits/infer"
                n = 0
                while not stop.is_set() and n < 100000:  # bounded
                    n += 1
                    t0 = time.monotonic()
                    try:
                        r = s.post(url, json=body, timeout=60)
                    except requests.RequestException as e:
                        failures.append(repr(e))
                        continue
                    t1 = time.monotonic()
                    if r.status_code != 200:
                        failures.append(f"{r.status_code}: {r.text[:200]}")
                        continue
                    out.append((t0, t1, r.json().get("model_version")))

            for i in range(self.CLIENTS):
                t = threading.Thread(target=client, args=(results[i],), daemon=True)
                t.start()
                threads.append(t)
            time.sleep(0.5)
            # swaps[i] = (start, end, version): before start the previous one
            # is current, after end this one, in between either.
            swaps = [(0.0, 0.0, versions[0])]
            for i in range(self.SWAPS):
                v = versions[(i + 1) % 2]
                t0, t1 = apply(v)
                swaps.append((t0, t1, v))
            time.sleep(0.3)
            stop.set()
            for t in threads:
                t.join(120)
            self.assertEqual(failures, [], f"{len(failures)} requests failed during the swaps")
            answers = [a for per in results for a in per]
            self.assertGreater(len(answers), 2 * self.SWAPS, "too few requests to judge")

            def possible(t0, t1):
                """Versions that could have been current within [t0, t1]: each
                from the start of its swap until the end of the next one."""
                out = set()
                for i, (start, _, v) in enumerate(swaps):
                    until = swaps[i + 1][1] if i + 1 < len(swaps) else float("inf")
                    if start <= t1 and t0 <= until:
                        out.add(v)
                return out

            wrong = [(t0, t1, v) for t0, t1, v in answers if v not in possible(t0, t1)]
            self.assertEqual(wrong[:5], [], f"{len(wrong)} answers tagged with a version not current at the time")
            seen = {v for _, _, v in answers}
            self.assertEqual(seen, set(versions), "both versions should have answered")
        finally:
            stop.set()
            for t in threads:
                t.join(10)


class VersionHeaderTests(ts.TempModelsTestCase):
    """Every inference answer names the version that answered: OIP v2 in its
    body and every protocol in the Mcp-Model-Version header; it follows a
    swap; errors carry none."""

    def test_header_on_every_protocol(self):
        server = self.start("--model-root", self.models)
        v2 = ts.digits_v2_body()
        row = v2["inputs"][0]["data"]
        calls = (
            ("/v2/models/digits/infer", v2),
            ("/v1/models/digits:predict", {"instances": [row]}),
            ("/v1/infer", {"input": row, "shape": [1, 64], "model": "digits"}),
        )
        for version in ("v1.0.0", "v2.3.4"):
            r = self.apply(server, "digits", ts.digits_descriptor("digits", self.model, version=version))
            self.assertEqual(r.status_code, 200, r.text)
            for path, body in calls:
                r = ts.http(server, "POST", path, json_body=body)
                self.assertEqual(r.status_code, 200, r.text)
                self.assertEqual(r.headers.get("Mcp-Model-Version"), version, path)
                if path.startswith("/v2/"):
                    self.assertEqual(r.json()["model_version"], version)
        r = ts.http(server, "POST", "/v1/models/digits:predict", json_body={"instances": [[1.0]]})
        self.assertEqual(r.status_code, 400, r.text)
        self.assertNotIn("Mcp-Model-Version", r.headers)


class LifecycleTests(ts.TempModelsTestCase):
    """Each version's transitions, with their times, in describe (and so in
    mcpctl describe): Registered, Loading, Ready, then Draining and Unloaded
    once replaced or unloaded; a failed load is Failed with its reason."""

    def test_transitions_of_two_versions(self):
        model = self.model
        server = self.start("--model-root", self.models)
        t_start = time.time() * 1000

        def load(version, path=model):
            return self.apply(server, "digits", ts.digits_descriptor("digits", path, version=version))

        self.assertEqual(load("v1.0.0").status_code, 200)
        self.assertEqual(load("v1.1.0").status_code, 200)
        broken = os.path.join(self.models, "broken.onnx")
        with open(broken, "wb") as f:
            f.write(b"not an onnx model")
        self.assertNotEqual(load("v1.2.0", broken).status_code, 200)
        self.assertEqual(ts.http(server, "POST", "/v2/repository/models/digits/unload").status_code, 200)

        def steps():
            d = ts.http(server, "GET", "/v2/repository/models/digits").json()
            return d["lifecycle"]

        ts.wait_for(lambda: sum(1 for x in steps() if x["state"] == "unloaded") == 2, "both versions unloaded")
        got = steps()
        by_version = {}
        for x in got:
            by_version.setdefault(x["version"], []).append(x["state"])
        self.assertEqual(by_version["v1.0.0"], ["registered", "loading", "ready", "draining", "unloaded"], got)
        self.assertEqual(by_version["v1.1.0"], ["registered", "loading", "ready", "draining", "unloaded"], got)
        self.assertEqual(by_version["v1.2.0"], ["registered", "loading", "failed"], got)
        failed = [x for x in got if x["state"] == "failed"][0]
        self.assertIn("broken.onnx", failed["reason"])
        self.assertNotIn(self.tmp, failed["reason"])
        times = [x["time_ms"] for x in got]
        self.assertEqual(times, sorted(times), "transitions in order")
        self.assertTrue(t_start - 60000 <= times[0] <= time.time() * 1000 + 60000, "wall-clock milliseconds")
        p = ts.subprocess.run([ts.MCPCTL_BIN, "describe", "model", "digits", "--server", server.url],
                              capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertIn("lifecycle", p.stdout.decode())
        self.assertIn("draining", p.stdout.decode())


if __name__ == "__main__":
    unittest.main()
