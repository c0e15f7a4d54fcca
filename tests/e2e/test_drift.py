#!/usr/bin/python3
"""Output monitoring end to end (issue 13): a real server watches two
versions of an identity model (its outputs are its inputs, so the input
distribution is the output distribution). One is fed N(0, 1) for ten
windows after its reference filled and never drifts; the other is fed
N(0, 1), then N(1.5, 1), and within one window its drift score passes the
threshold, /metrics says so, the control plane's event log records it, and
the status page shows it. A canary whose outputs drift is stopped as by
any other gate.

Run one class by hand:
  MCP_SERVER_BIN=build/bin/mcp2026-server MCPCTL_BIN=build/bin/mcpctl \\
    /usr/bin/python3 -m unittest -v test_drift.DriftTests
"""
import os
import shutil
import tempfile
import unittest

import numpy as np

import test_server as ts

WINDOW = 240          # samples (values) per window; 3 values per request
THRESHOLD = 0.3
PER_REQUEST = 3       # identity_fp32 is [batch, 3]
REQUESTS_PER_WINDOW = WINDOW // PER_REQUEST


def setUpModule():
    ts.setUpModule()


def tearDownModule():
    ts.tearDownModule()


def descriptor(name, version="v1.0.0", extra=""):
    return (f"name: {name}\nversion: {version}\nformat: onnx\npath: identity_fp32.onnx\n"
            f"monitoring:\n  sample_rate: 1\n  window: {WINDOW}\n  min_samples: {WINDOW}\n  threshold: {THRESHOLD}\n{extra}")


class FolderServerTestCase(ts.ServerTestCase):
    """A server over a temporary folder that server_args fills; removed after."""

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            shutil.rmtree(cls.folder, ignore_errors=True)


class DriftTests(FolderServerTestCase):
    @classmethod
    def server_args(cls):
        cls.folder = tempfile.mkdtemp(prefix="mcp-drift-")
        cls.store = os.path.join(cls.folder, "store")
        repo = os.path.join(cls.folder, "repo")
        os.makedirs(repo)
        shutil.copy(ts.model_file("identity_fp32"), os.path.join(repo, "identity_fp32.onnx"))
        for name in ("steady", "shifty"):
            with open(os.path.join(repo, f"{name}.yaml"), "w") as f:
                f.write(descriptor(name))
        return ["--model-repository", repo, "--store", cls.store]

    def send(self, model, rng, n, mean):
        for _ in range(n):
            x = rng.normal(mean, 1.0, size=(1, PER_REQUEST)).astype(np.float32)
            r = self.infer(model, [("ident_in", "FP32", x, False)])
            self.assertEqual(r.status_code, 200, r.text)

    def metric(self, name, **labels):
        _, samples = ts.get_metrics(self, self.server)
        return ts.metric_sum(samples, name, **labels)

    def drift_json(self, model):
        status = self.call("GET", "/v2/status").json()
        (m,) = [x for x in status["models"] if x["name"] == model]
        return m["versions"][0]["drift"]

    def wait_samples(self, model, count):
        """The monitor's thread works off the hot path and refreshes its
        scores at most ten times a second: wait (bounded) until it has
        evaluated them all."""
        ts.wait_for(lambda: self.drift_json(model)["evaluated"] >= count, f"{count} monitored requests of {model}")
        self.assertEqual(self.metric("mcp_monitor_samples_total", model=model), count)
        self.assertEqual(self.metric("mcp_monitor_samples_dropped_total", model=model), 0)

    def test_startup_loads_are_counted(self):
        # The repository's models loaded before serving count as loads.
        for name in ("steady", "shifty"):
            self.assertEqual(self.metric("mcp_model_loads_total", model=name, outcome="success"), 1, name)
            self.assertEqual(self.metric("mcp_model_load_duration_seconds_count", model=name, outcome="success"), 1)

    def test_unchanged_traffic_does_not_drift(self):
        rng = np.random.default_rng(7)
        sent = 0
        for window in range(11):  # the reference, then ten windows
            self.send("steady", rng, REQUESTS_PER_WINDOW, 0.0)
            sent += REQUESTS_PER_WINDOW
            self.wait_samples("steady", sent)
            self.assertEqual(self.metric("mcp_monitor_drifted", model="steady"), 0, f"window {window}")
        self.assertEqual(self.metric("mcp_monitor_drift_events_total", model="steady"), 0)
        score = self.metric("mcp_monitor_drift_score", model="steady", output="ident_out", statistic="ks")
        self.assertLess(score, THRESHOLD)
        self.assertGreater(score, 0, "the current window was judged against the reference")
        self.assertEqual(self.metric("mcp_monitor_drift_threshold", model="steady"), THRESHOLD)
        events = self.call("GET", "/v2/events?model=steady").json()
        self.assertFalse([e for e in events if e["action"].startswith("monitor.")], events)

    def test_shifted_traffic_drifts_within_a_window(self):
        rng = np.random.default_rng(11)
        self.send("shifty", rng, REQUESTS_PER_WINDOW, 0.0)  # the reference
        self.send("shifty", rng, REQUESTS_PER_WINDOW // 2, 0.0)
        self.wait_samples("shifty", REQUESTS_PER_WINDOW * 3 // 2)
        self.assertEqual(self.metric("mcp_monitor_drifted", model="shifty"), 0)
        # The shift: a window of N(1.5, 1) must be enough.
        self.send("shifty", rng, REQUESTS_PER_WINDOW, 1.5)
        self.wait_samples("shifty", REQUESTS_PER_WINDOW * 5 // 2)
        self.assertEqual(self.metric("mcp_monitor_drifted", model="shifty"), 1)
        self.assertEqual(self.metric("mcp_monitor_drift_events_total", model="shifty"), 1)
        score = self.metric("mcp_monitor_drift_score", model="shifty", output="ident_out", statistic="ks")
        self.assertGreater(score, THRESHOLD)
        means = {w: self.metric("mcp_monitor_output_mean", model="shifty", output="ident_out", window=w)
                 for w in ("reference", "current")}
        self.assertLess(abs(means["reference"]), 0.3)
        self.assertGreater(means["current"], 0.8)
        # The control plane's event log has it.
        events = ts.wait_for(lambda: [e for e in self.call("GET", "/v2/events?model=shifty").json()
                                      if e["action"] == "monitor.drift"], "the drift event in the event log")
        self.assertIn("ks", events[0]["reason"])
        self.assertEqual(events[0]["target"], "shifty")
        self.assertIn("v1.0.0", events[0]["reason"])
        # The status page's JSON shows the version drifted.
        drift = self.drift_json("shifty")
        self.assertTrue(drift["drifted"])
        self.assertGreater(drift["score"], drift["threshold"])


class DriftCanaryTests(FolderServerTestCase):
    """A canary whose outputs drift from its own reference is stopped."""

    @classmethod
    def server_args(cls):
        cls.folder = tempfile.mkdtemp(prefix="mcp-drift-canary-")
        shutil.copy(ts.model_file("identity_fp32"), os.path.join(cls.folder, "identity_fp32.onnx"))
        with open(os.path.join(cls.folder, "m.yaml"), "w") as f:
            f.write(descriptor("m"))
        return ["--model-repository", cls.folder]

    def test_drifted_canary_is_stopped(self):
        body = descriptor("m", version="v2.0.0", extra="rollout:\n  canary: {version: v2.0.0, weight: 50}\n")
        r = self.call("POST", "/v2/repository/models/m/load", json_body={"parameters": {"config": body}})
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(self.call("GET", "/v2/models/m/rollout").json()["canary"], {"version": "v2.0.0", "weight": 50})
        rng = np.random.default_rng(5)
        # Both versions fill a reference (about half the traffic each), then the traffic shifts.
        for mean in (0.0, 2.0):
            for _ in range(REQUESTS_PER_WINDOW * 3):
                x = rng.normal(mean, 1.0, size=(1, PER_REQUEST)).astype(np.float32)
                self.assertEqual(self.infer("m", [("ident_in", "FP32", x, False)]).status_code, 200)
        ts.wait_for(lambda: self.call("GET", "/v2/models/m/rollout").json()["canary"] is None,
                    "the drift gate to stop the canary")
        life = self.call("GET", "/v2/repository/models/m").json()["lifecycle"]
        self.assertTrue(any(x["version"] == "v2.0.0" and "gate drift" in x.get("reason", "") for x in life), life)


if __name__ == "__main__":
    unittest.main()
