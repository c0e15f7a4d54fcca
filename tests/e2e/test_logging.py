#!/usr/bin/python3
"""The server's log end to end (issue 13): JSON or text lines, the access
log with request and trace ids, --log-level honoured by every message,
Triton's logging API (GET/POST /v2/logging) and what it refuses.

Run one class by hand:
  MCP_SERVER_BIN=build/bin/mcp2026-server MCPCTL_BIN=build/bin/mcpctl \\
    /usr/bin/python3 -m unittest -v test_logging.LoggingTests
"""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import numpy as np

import test_grpc as tg
import test_server as ts

TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (ERROR|WARN|INFO|VERBOSE) mcp2026-server: \S")


def setUpModule():
    tg.setUpModule()


def tearDownModule():
    tg.tearDownModule()


def json_lines(text):
    """Every whole line is one JSON object (a line still being written is
    left for the next read)."""
    rows = []
    # Lines end at "\n" only (str.splitlines would also cut at U+2028,
    # which JSON strings may hold as they are).
    *whole, _partial = text.split("\n")
    for line in whole:
        row = json.loads(line)  # every line is one JSON object
        for key in ("time", "level", "message"):
            assert key in row, f"{key} missing in {line}"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", row["time"]), row["time"]
        assert row["level"] in ("error", "warn", "info", "verbose"), row["level"]
        rows.append(row)
    return rows


def wait_lines(path, predicate, what):
    def check():
        with open(path) as f:
            rows = json_lines(f.read())
        return [r for r in rows if predicate(r)]
    return ts.wait_for(check, what, timeout=30)


class RemovesDir:
    """Removes the folder server_args made (cls.dir) once the server stopped."""

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            shutil.rmtree(cls.dir, ignore_errors=True)


class LoggingTests(RemovesDir, tg.GrpcServerTestCase):
    """JSON lines on stderr and in the access log; tracing on (to a
    collector that refuses connections), so calls have trace ids."""

    @classmethod
    def server_args(cls):
        cls.dir = tempfile.mkdtemp(prefix="mcp-log-")
        cls.access = os.path.join(cls.dir, "access.log")
        closed = tg.free_port()  # nothing listens there: exports fail, calls do not
        return super().server_args() + ["--log-format", "json", "--access-log", cls.access,
                                        "--trace-endpoint", f"http://127.0.0.1:{closed}/v1/traces"]

    def test_stderr_is_json_lines(self):
        rows = json_lines(self.server.stderr_text())
        self.assertTrue(any("listening on http://127.0.0.1:" in r["message"] and r["level"] == "info" for r in rows), rows)

    def test_access_log_names_the_request(self):
        trace_id, parent = os.urandom(16).hex(), os.urandom(8).hex()
        body = dict(ts.digits_v2_body(), id="req-42")
        r = self.call("POST", "/v2/models/digits/infer", json_body=body,
                      headers={"traceparent": f"00-{trace_id}-{parent}-01", "tenant": "team-a"})
        self.assertEqual(r.status_code, 200)
        span = r.headers["traceparent"].split("-")[2]
        (row,) = wait_lines(self.access, lambda x: x.get("trace_id") == trace_id, "the access line of the call")
        self.assertEqual(row["request_id"], "req-42")
        self.assertEqual(row["span_id"], span)
        self.assertEqual(row["model"], "digits")
        self.assertEqual(row["version"], "v1.0.0")
        self.assertEqual(row["status"], 200)
        self.assertEqual(row["protocol"], "v2")
        self.assertEqual(row["transport"], "http")
        self.assertEqual(row["route"], "/v2/models/{mv}/infer")
        self.assertEqual(row["tenant"], "team-a")
        self.assertGreaterEqual(row["duration_ms"], 0)
        # gRPC calls too, and a refused one with its status.
        arr = ts.samples()[0].astype(np.float32)
        req = tg.infer_request("digits", "input", "FP32", arr, raw=True, req_id="grpc-7")
        self.stub.ModelInfer(req, metadata=[("traceparent", f"00-{os.urandom(16).hex()}-{parent}-01")], timeout=ts.HTTP_TIMEOUT_S)
        (row,) = wait_lines(self.access, lambda x: x.get("request_id") == "grpc-7", "the gRPC access line")
        self.assertEqual((row["transport"], row["method"], row["status"], row["model"]), ("grpc", "ModelInfer", 0, "digits"))
        bad = self.call("POST", "/v2/models/digits/infer", json_body={"id": "bad-1", "inputs": []})
        self.assertEqual(bad.status_code, 400)
        wait_lines(self.access, lambda x: x.get("status") == 400 and x.get("route") == "/v2/models/{mv}/infer", "a 400")

    def test_hostile_strings_stay_inside_their_field(self):
        for rid in ("a\nb", 'x","level":"error', "\u2028\x1b[31m"):
            body = dict(ts.digits_v2_body(), id=rid)
            self.assertEqual(self.call("POST", "/v2/models/digits/infer", json_body=body).status_code, 200)
            wait_lines(self.access, lambda x, rid=rid: x.get("request_id") == rid, f"the line of id {rid!r}")
        with open(self.access) as f:
            json_lines(f.read())  # still one JSON object per line

    def test_logging_api(self):
        got = self.call("GET", "/v2/logging").json()
        self.assertEqual(got, {"log_file": "", "log_info": True, "log_warning": True, "log_error": True,
                               "log_verbose_level": 0, "log_format": "json"})
        for body, word in (({"log_file": "/tmp/x"}, "log_file"), ({"log_info": "yes"}, "log_info"),
                           ({"log_verbose_level": -1}, "log_verbose_level"), ({"log_format": "xml"}, "log_format"),
                           ({"colour": True}, "colour"), ([], "object")):
            r = self.call("POST", "/v2/logging", json_body=body)
            self.assertEqual(r.status_code, 400, (body, r.text))
            self.assertIn(word, r.json()["error"])
        self.assertEqual(self.call("GET", "/v2/logging").json(), got, "a refused body changes nothing")
        r = self.call("POST", "/v2/logging", json_body={"log_info": False}, headers={"Origin": "http://evil.example"})
        self.assertEqual(r.status_code, 403)
        self.assertEqual(self.call("GET", "/v2/logging").json()["log_info"], True)


class ObserveTokenTests(RemovesDir, ts.ServerTestCase):
    """With an admin token, changing the log or the trace settings needs it
    (reading them does not)."""
    TOKEN = "observe-token-0123456789"

    @classmethod
    def server_args(cls):
        cls.dir = tempfile.mkdtemp(prefix="mcp-observe-token-")
        return ["--model-path", ts.DIGITS, "--admin-token-file", ts.write_token_file(cls.dir, cls.TOKEN)]

    def test_changes_need_the_token(self):
        for path, body in (("/v2/logging", {"log_info": True}), ("/v2/trace/setting", {"trace_level": ["OFF"]}),
                           ("/v2/models/digits/trace/setting", {"trace_level": ["OFF"]})):
            self.assertEqual(self.call("GET", path).status_code, 200, path)
            for auth in (None, "Bearer wrong-token-0123456789"):
                r = self.call("POST", path, json_body=body, headers={"Authorization": auth} if auth else None)
                self.assertEqual(r.status_code, 401, (path, auth, r.text))
            r = self.call("POST", path, json_body=body, headers={"Authorization": f"Bearer {self.TOKEN}"})
            self.assertEqual(r.status_code, 200, (path, r.text))


class LogLevelTests(unittest.TestCase):
    """--log-level and POST /v2/logging hold for every message, start-up
    and repository diagnostics included; text lines by default."""

    def start(self, *args):
        port = tg.free_port()
        self.folder = tempfile.mkdtemp(prefix="mcp-loglevel-")
        with open(os.path.join(self.folder, "broken.yaml"), "w") as f:
            f.write("name: broken\nformat: onnx\npath: missing.onnx\n")  # a warning when the repository is scanned
        shutil.copy(ts.DIGITS, os.path.join(self.folder, "digits.onnx"))
        with open(os.path.join(self.folder, "digits.yaml"), "w") as f:
            f.write("name: digits\nformat: onnx\npath: digits.onnx\n")
        self.addCleanup(shutil.rmtree, self.folder, True)
        proc = subprocess.Popen([ts.SERVER_BIN, "--model-repository", self.folder, "--host", "127.0.0.1", "--port",
                                 str(port), "--grpc-port", "0", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        url = f"http://127.0.0.1:{port}"
        ts.wait_for(lambda: self._ready(url), "the server to be ready", timeout=ts.START_TIMEOUT_S)
        return proc, url

    @staticmethod
    def _ready(url):
        try:
            import requests
            return requests.get(url + "/v2/health/ready", timeout=5).status_code == 200
        except Exception:
            return False

    def stop(self, proc):
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=ts.STOP_TIMEOUT_S)
        self.assertEqual(proc.returncode, 0, err.decode(errors="replace"))
        return err.decode(errors="replace")

    def test_error_level_silences_the_rest(self):
        proc, _ = self.start("--log-level", "error")
        err = self.stop(proc)
        self.assertEqual(err, "", "only errors at --log-level error; there were none")

    def test_text_lines_and_run_time_level(self):
        import requests
        proc, url = self.start()
        r = requests.post(url + "/v2/logging", json={"log_info": False, "log_warning": False}, timeout=30)
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(r.json()["log_format"], "default")
        err = self.stop(proc)
        lines = err.splitlines()
        for line in lines:
            self.assertRegex(line, TEXT_LINE)
        self.assertTrue(any("listening on http://" in l and " INFO " in l for l in lines), err)
        self.assertTrue(any("missing.onnx" in l and " WARN " in l for l in lines), "the repository's diagnostics are warnings")
        # Info turned off at run time: the stop is not told.
        self.assertFalse(any("received" in l or "stopped" in l for l in lines), err)


if __name__ == "__main__":
    unittest.main()
