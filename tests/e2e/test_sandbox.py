#!/usr/bin/python3
"""The sandbox (issue 14) through a real server.

mcp2026-server-probe is the server built with a test-only kernel
(tests/sandbox/probe_kernel.c): op SandboxProbe tries one system call the
inference filter forbids (socket, execve of a path that does not exist,
open of /etc/hostname) before copying its input to its output. With the
sandbox on (the default) each probe's request fails with a message naming
the call and "Operation not permitted", and the server goes on serving;
with --no-sandbox the same requests succeed.

Environment: as test_server.py, plus MCP_PROBE_SERVER_BIN, the probe
server (default: mcp2026-server-probe beside MCP_SERVER_BIN). Run one
class by hand:

  MCP_SERVER_BIN=build/bin/mcp2026-server MCPCTL_BIN=build/bin/mcpctl \\
    /usr/bin/python3 -m unittest -v test_sandbox.SandboxProbeTests
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import test_server as ts

PROBE_BIN = os.environ.get("MCP_PROBE_SERVER_BIN") or os.path.join(os.path.dirname(ts.SERVER_BIN),
                                                                    "mcp2026-server-probe")
# The probe models' actions and the system call each one's error names.
PROBES = {"socket": "socket", "exec": "execve", "open": "open"}
PROBE_DIR = None


def setUpModule():
    global PROBE_DIR
    ts.setUpModule()
    if not os.access(PROBE_BIN, os.X_OK):
        raise RuntimeError(f"{PROBE_BIN}: not an executable (set MCP_PROBE_SERVER_BIN; built by tests/sandbox/)")
    PROBE_DIR = tempfile.mkdtemp(prefix="mcp-e2e-sandbox-")
    gen = subprocess.run([sys.executable, os.path.join(ts.SOURCE_DIR, "tools", "make_sandbox_model.py"), PROBE_DIR],
                         capture_output=True, timeout=300)
    if gen.returncode != 0:
        raise RuntimeError("tools/make_sandbox_model.py failed: " + gen.stderr.decode(errors="replace"))


def tearDownModule():
    ts.tearDownModule()
    if PROBE_DIR:
        shutil.rmtree(PROBE_DIR, ignore_errors=True)


X = np.arange(4, dtype=np.float32).reshape(1, 4) + 0.5


class ProbeServerTestCase(ts.ServerTestCase):
    """One probe server per class serving the three probe models."""

    server_binary = PROBE_BIN
    extra_args = []

    @classmethod
    def server_args(cls):
        args = []
        for action in PROBES:
            args += ["--model-path", os.path.join(PROBE_DIR, f"probe_{action}.onnx")]
        return args + cls.extra_args

    def probe(self, action):
        body, headers = ts.v2_request([("x", "FP32", X, False)])
        return ts.http(self.server, "POST", f"/v2/models/probe_{action}/infer", body=body, headers=headers)

    def assert_ready(self):
        r = ts.http(self.server, "GET", "/v2/health/ready")
        self.assertEqual(r.status_code, 200, r.text)


class SandboxProbeTests(ProbeServerTestCase):
    """Sandbox on: every forbidden call fails its request cleanly, again
    and again, and the server stays ready."""

    def assert_refused(self, action):
        call = PROBES[action]
        msg = ts.error_message(self, self.probe(action), 500)
        self.assertIn(f"{call}: Operation not permitted", msg)
        self.assertIn("SandboxProbe", msg)
        return msg

    def test_socket_refused(self):
        self.assertEqual(self.assert_refused("socket"), self.assert_refused("socket"))
        self.assert_ready()

    def test_exec_refused(self):
        self.assertEqual(self.assert_refused("exec"), self.assert_refused("exec"))
        self.assert_ready()

    def test_open_refused(self):
        self.assertEqual(self.assert_refused("open"), self.assert_refused("open"))
        self.assert_ready()

    def test_startup_says_the_sandbox_is_on(self):
        log = self.server.stderr_text()
        self.assertIn("sandbox: a seccomp filter on inference threads", log)
        self.assertIn("cgroup v2", log)


class NoSandboxProbeTests(ProbeServerTestCase):
    """--no-sandbox: the same calls reach the kernel and the probes answer."""

    extra_args = ["--no-sandbox"]

    def test_probes_succeed(self):
        for action in PROBES:
            with self.subTest(action=action):
                _, out = ts.parse_v2_response(self, self.probe(action))
                ts.assert_identical(self, out["y"], X, f"probe_{action}'s output")

    def test_startup_says_the_sandbox_is_off(self):
        self.assertIn("sandbox: off (--no-sandbox)", self.server.stderr_text())


class ResourcesTests(ts.ServerTestCase):
    """A descriptor's resources: memory is a ceiling on what the version's
    load and runs allocate (a load or a request over it fails naming the
    limit, and the server and the model go on); cpus caps its threads."""

    @classmethod
    def server_args(cls):
        return ["--model-root", PROBE_DIR]

    def apply(self, name, resources, extra=""):
        text = f"name: {name}\nformat: onnx\npath: wide.onnx\nmax_batch_size: 0\nresources: {resources}\n{extra}"
        return ts.http(self.server, "POST", f"/v2/repository/models/{name}/load",
                       json_body={"parameters": {"config": text}})

    def infer(self, name, rows):
        x = np.full((rows, 512), 0.5, dtype=np.float32)
        body, headers = ts.v2_request([("x", "FP32", x, True)])
        return ts.http(self.server, "POST", f"/v2/models/{name}/infer", body=body, headers=headers)

    def test_load_over_the_limit_refused(self):
        msg = ts.error_message(self, self.apply("wide_tiny", "{memory: 1Mi}"), (400, 500, 503, 507))
        self.assertIn("resources.memory", msg)
        self.assertIn("1048576 bytes", msg)
        self.assertEqual(ts.http(self.server, "GET", "/v2/models/wide_tiny/ready").status_code, 404)

    def test_run_over_the_limit_fails_then_recovers(self):
        r = self.apply("wide_8m", "{memory: 8Mi}")
        self.assertEqual(r.status_code, 200, r.text)
        _, out = ts.parse_v2_response(self, self.infer("wide_8m", 1))
        np.testing.assert_allclose(out["y"], np.full((1, 512), 0.5, dtype=np.float32), rtol=1e-5)
        # 4096 rows: the output alone is 8 MiB.
        msg = ts.error_message(self, self.infer("wide_8m", 4096), 503)
        self.assertIn("memory limit (resources.memory, 8388608 bytes) is reached", msg)
        self.assertIn("node 'wide'", msg)
        _, out = ts.parse_v2_response(self, self.infer("wide_8m", 2))
        self.assertEqual(out["y"].shape, (2, 512))
        # The same request fits a version with room for it.
        self.assertEqual(self.apply("wide_32m", "{memory: 32Mi}").status_code, 200)
        _, out = ts.parse_v2_response(self, self.infer("wide_32m", 4096))
        self.assertEqual(out["y"].shape, (4096, 512))
        self.assertIsNone(self.server.proc.poll())

    def test_cpus_cap_threads(self):
        r = self.apply("wide_cpus", "{cpus: 1.5}", "instances: {count: 1, threads: 8}\n")
        self.assertEqual(r.status_code, 200, r.text)
        desc = ts.http(self.server, "GET", "/v2/repository/models/wide_cpus").json()["descriptor"]
        self.assertEqual(desc["instances"], {"count": 1, "threads": 2})
        self.assertEqual(desc["resources"], {"cpus": 1.5})
        msg = ts.error_message(self, self.apply("wide_many", "{cpus: 2}", "instances: {count: 3}\n"), 400)
        self.assertIn("resources.cpus allows 2 threads", msg)

    def test_bad_resources_refused(self):
        for res, want in (("{memory: 2GB}", "resources.memory: expected bytes"),
                          ("{memory: 99999999Ti}", "resources.memory: 99999999Ti is out of range"),
                          ("{cpus: -1}", "resources.cpus: -1 is out of range"),
                          ("{gpus: 1}", "resources.gpus: unknown key")):
            with self.subTest(resources=res):
                self.assertIn(want, ts.error_message(self, self.apply("wide_bad", res), 400))


if __name__ == "__main__":
    unittest.main()
