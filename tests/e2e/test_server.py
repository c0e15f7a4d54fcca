#!/usr/bin/python3
"""End-to-end tests of mcp2026-server over loopback HTTP (issue 3, "Must show").

Each test class starts a real server on 127.0.0.1 with a free port as a
subprocess, waits (bounded) for /v2/health/ready and always stops it. Every
response any test receives is validated against schemas/openapi.json by
tests/e2e/openapi_check.py. Expected numbers come from `mcpctl run` on the
same inputs and are compared for exact (bitwise) equality.

Environment (set by tests/e2e/CMakeLists.txt):
  MCP_SERVER_BIN  path to mcp2026-server
  MCPCTL_BIN      path to mcpctl (the engine reference: `mcpctl run`)
  MCP_SOURCE_DIR  source tree (models/demo, schemas/, tools/make_e2e_models.py)

Run one class by hand:
  MCP_SERVER_BIN=build/bin/mcp2026-server MCPCTL_BIN=build/bin/mcpctl \
    /usr/bin/python3 -m unittest -v test_server.ProtocolTests

Only Debian Python packages are used (python3-requests, python3-numpy,
python3-onnx through tools/make_e2e_models.py, python3-jsonschema through
openapi_check). Every loop and wait is bounded; nothing asserts on time.
"""
import atexit
import concurrent.futures
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np
import requests

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("MCP_SOURCE_DIR") or os.path.normpath(os.path.join(HERE, "..", ".."))
SERVER_BIN = os.environ.get("MCP_SERVER_BIN", "")
MCPCTL_BIN = os.environ.get("MCPCTL_BIN", "")
DEMO_DIR = os.path.join(SOURCE_DIR, "models", "demo")
DIGITS = os.path.join(DEMO_DIR, "digits.onnx")
SPEC_PATH = os.path.join(SOURCE_DIR, "schemas", "openapi.json")

START_TIMEOUT_S = 120   # server start, model load and warm-up (sanitizer builds are slow)
HTTP_TIMEOUT_S = 120    # one HTTP exchange
STOP_TIMEOUT_S = 120    # SIGTERM -> exit (drains in-flight requests first)
POLL_INTERVAL_S = 0.05

sys.path.insert(0, HERE)
try:
    import openapi_check  # validate_response(spec, method, path, status, ctype, body, headers)
except ImportError as e:  # reported by every response check, not silently skipped
    openapi_check = None
    _OPENAPI_IMPORT_ERROR = str(e)

with open(SPEC_PATH, "rb") as _f:
    SPEC = json.loads(_f.read())

# OIP datatype <-> numpy (little-endian, as the binary extension requires).
NP_DTYPE = {
    "BOOL": np.dtype("|b1"), "UINT8": np.dtype("|u1"), "INT8": np.dtype("|i1"),
    "UINT16": np.dtype("<u2"), "INT16": np.dtype("<i2"), "UINT32": np.dtype("<u4"),
    "INT32": np.dtype("<i4"), "UINT64": np.dtype("<u8"), "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"), "FP32": np.dtype("<f4"), "FP64": np.dtype("<f8"),
}
OIP_DATATYPE = {np.dtype(v).newbyteorder("="): k for k, v in NP_DTYPE.items()}

MODELS_DIR = None   # made by setUpModule with tools/make_e2e_models.py
_LIVE_SERVERS = []  # every server started, killed at exit whatever happens
_REF_CACHE = {}


# ---------------------------------------------------------------------------
# module setup: generated models, reference outputs
# ---------------------------------------------------------------------------

def setUpModule():
    global MODELS_DIR
    missing = [n for n, v in (("MCP_SERVER_BIN", SERVER_BIN), ("MCPCTL_BIN", MCPCTL_BIN)) if not v]
    if missing:
        raise RuntimeError(f"environment variable(s) {', '.join(missing)} not set (see tests/e2e/CMakeLists.txt)")
    for path in (SERVER_BIN, MCPCTL_BIN):
        if not os.access(path, os.X_OK):
            raise RuntimeError(f"{path}: not an executable")
    MODELS_DIR = tempfile.mkdtemp(prefix="mcp-e2e-models-")
    gen = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "tools", "make_e2e_models.py"), MODELS_DIR],
                         capture_output=True, timeout=300)
    if gen.returncode != 0:
        raise RuntimeError("tools/make_e2e_models.py failed: " + gen.stderr.decode(errors="replace"))


def tearDownModule():
    for s in list(_LIVE_SERVERS):
        s.kill()
    if MODELS_DIR:
        shutil.rmtree(MODELS_DIR, ignore_errors=True)


@atexit.register
def _kill_leftovers():
    for s in list(_LIVE_SERVERS):
        s.kill()


def model_file(name):
    return os.path.join(MODELS_DIR, name + ".onnx")


def samples():
    """The committed demo inputs, float32 [1, 64] each."""
    return [np.load(os.path.join(DEMO_DIR, f"sample_{k}.npy")) for k in range(5)]


def mcpctl_run(model, **inputs):
    """Runs `mcpctl run MODEL OUTDIR NAME=FILE.npy...`; returns {output: array}."""
    key = (model, tuple((k, v.dtype.str, v.shape, v.tobytes()) for k, v in sorted(inputs.items())))
    if key in _REF_CACHE:
        return _REF_CACHE[key]
    with tempfile.TemporaryDirectory(prefix="mcp-e2e-ref-") as d:
        out = os.path.join(d, "out")
        args = [MCPCTL_BIN, "run", model, out]
        for name, arr in inputs.items():
            p = os.path.join(d, f"in_{len(args)}.npy")
            np.save(p, arr)
            args.append(f"{name}={p}")
        r = subprocess.run(args, capture_output=True, timeout=600)
        if r.returncode != 0:
            raise AssertionError(f"reference run failed: {' '.join(args)}: {r.stderr.decode(errors='replace')}")
        result = {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".npy")}
    _REF_CACHE[key] = result
    return result


# ---------------------------------------------------------------------------
# the server under test
# ---------------------------------------------------------------------------

class Server:
    """mcp2026-server as a subprocess on 127.0.0.1:<free port>; `binary`
    runs another build of it (default: MCP_SERVER_BIN)."""

    def __init__(self, *args, binary=None):
        self.args = [str(a) for a in args]
        self.binary = binary or SERVER_BIN
        self.proc = None
        self.port = None
        self.lines = []
        self._cond = threading.Condition()
        self._reader = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stderr_text(self):
        with self._cond:
            return "".join(self.lines)

    def _read_stderr(self):
        pattern = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace")
            with self._cond:
                self.lines.append(line)
                m = pattern.search(line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def start(self):
        cmd = [self.binary, *self.args, "--host", "127.0.0.1", "--port", "0"]
        if "--grpc-port" not in self.args:
            cmd += ["--grpc-port", "0"]  # gRPC only where a test asks for it (tests/e2e/test_grpc.py)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        _LIVE_SERVERS.append(self)
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        with self._cond:
            while self.port is None and self.proc.poll() is None and time.monotonic() < deadline:
                self._cond.wait(0.1)
        if self.port is None:
            rc = self.proc.poll()
            self.kill()
            raise AssertionError(f"server did not report 'listening on http://127.0.0.1:PORT' "
                                 f"(exit status {rc}); command: {' '.join(cmd)}\nstderr:\n{self.stderr_text()}")
        # Ready: bounded number of polls; each response validated too.
        last = None
        for _ in range(int(START_TIMEOUT_S / POLL_INTERVAL_S)):
            if self.proc.poll() is not None:
                break
            try:
                r = http(self, "GET", "/v2/health/ready", timeout=5)
                if r.status_code == 200:
                    return self
                last = f"status {r.status_code}: {r.text}"
            except requests.ConnectionError as e:
                last = str(e)
            time.sleep(POLL_INTERVAL_S)
        rc = self.proc.poll()
        self.kill()
        raise AssertionError(f"server never became ready (last answer: {last}; exit status {rc})\n"
                             f"stderr:\n{self.stderr_text()}")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout=STOP_TIMEOUT_S):
        """Exit status, or None when it is still running after timeout."""
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        if self._reader:
            self._reader.join(10)
        return rc

    def stop(self):
        """SIGTERM and wait; kills it when it does not exit. Returns the exit status."""
        if self.proc is None or self.proc.poll() is not None:
            rc = self.proc.returncode if self.proc else None
            self._forget()
            return rc
        self.signal(signal.SIGTERM)
        rc = self.wait()
        if rc is None:
            self.kill()
            return None
        self._forget()
        return rc

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self._forget()

    def _forget(self):
        if self in _LIVE_SERVERS:
            _LIVE_SERVERS.remove(self)
        if self.proc is not None and self.proc.poll() is not None:
            if self._reader:
                self._reader.join(10)
            if self.proc.stderr and not self._reader.is_alive():
                self.proc.stderr.close()


# ---------------------------------------------------------------------------
# HTTP helpers: every response goes through the OpenAPI check
# ---------------------------------------------------------------------------

def check_openapi(method, path, resp):
    """Validates one response against schemas/openapi.json; raises AssertionError.
    MCP_E2E_SKIP_OPENAPI=1 turns this off for triage by hand (to tell OpenAPI
    mismatches from functional failures); ctest never sets it."""
    if os.environ.get("MCP_E2E_SKIP_OPENAPI") == "1":
        return
    what = f"{method} {path} -> {resp.status_code}"
    if openapi_check is None:
        raise AssertionError(f"{what}: cannot validate against the OpenAPI document: "
                             f"tests/e2e/openapi_check.py not importable ({_OPENAPI_IMPORT_ERROR})")
    ctype = resp.headers.get("Content-Type", "")
    # validate_response raises AssertionError on a mismatch; it returns the
    # parsed body. The headers carry Inference-Header-Content-Length.
    try:
        openapi_check.validate_response(SPEC, method, path, resp.status_code, ctype, resp.content, resp.headers)
    except AssertionError as e:
        raise AssertionError(f"{what}: response does not match schemas/openapi.json: {e}") from None
    except Exception as e:  # a crash in the checker on a body it did not expect
        raise AssertionError(f"{what}: response does not match schemas/openapi.json: "
                             f"{type(e).__name__}: {e}") from None


def http(server, method, path, *, body=None, json_body=None, headers=None, timeout=HTTP_TIMEOUT_S,
         session=None, validate=True):
    """One request; the response is validated against the OpenAPI document."""
    hdrs = dict(headers or {})
    if json_body is not None:
        body = json.dumps(json_body).encode()
        hdrs.setdefault("Content-Type", "application/json")
    r = (session or requests).request(method, server.url + path, data=body, headers=hdrs, timeout=timeout)
    if validate:
        check_openapi(method, path, r)
    return r


def tensor_bytes(arr, datatype):
    """Binary-extension bytes of a tensor: little-endian, row-major; BYTES as
    4-byte length + bytes per element."""
    if datatype == "BYTES":
        return b"".join(struct.pack("<I", len(e)) + e for e in np.asarray(arr, dtype=object).reshape(-1))
    return np.ascontiguousarray(arr, dtype=NP_DTYPE[datatype]).tobytes()


def tensor_from_bytes(raw, datatype, shape):
    if datatype == "BYTES":
        items, off = [], 0
        for _ in range(int(np.prod(shape, dtype=np.int64))):
            if off + 4 > len(raw):
                raise AssertionError(f"BYTES output truncated at byte {off} of {len(raw)}")
            (n,) = struct.unpack_from("<I", raw, off)
            items.append(bytes(raw[off + 4:off + 4 + n]))
            off += 4 + n
        if off != len(raw):
            raise AssertionError(f"BYTES output has {len(raw) - off} trailing bytes")
        return np.array(items, dtype=object).reshape(shape)
    dt = NP_DTYPE[datatype]
    if len(raw) != dt.itemsize * int(np.prod(shape, dtype=np.int64)):
        raise AssertionError(f"{datatype} {shape}: {len(raw)} bytes is not {dt.itemsize} x elements")
    return np.frombuffer(raw, dtype=dt).reshape(shape)


def tensor_from_json(data, datatype, shape):
    if datatype == "BYTES":
        flat = np.asarray(data, dtype=object).reshape(-1)
        return np.array([s.encode("utf-8") if isinstance(s, str) else s for s in flat], dtype=object).reshape(shape)
    return np.asarray(data, dtype=NP_DTYPE[datatype]).reshape(shape)


def json_data(arr, datatype):
    """Flat JSON list for a tensor (exact for FP32: float32 -> double is exact)."""
    if datatype == "BYTES":
        return [e.decode("utf-8") for e in np.asarray(arr, dtype=object).reshape(-1)]
    flat = np.asarray(arr).reshape(-1)
    if datatype == "BOOL":
        return [bool(v) for v in flat]
    if datatype in ("FP32", "FP64", "FP16"):
        return [float(v) for v in flat]
    return [int(v) for v in flat]


def v2_request(inputs, outputs=None, parameters=None, req_id=None):
    """inputs: [(name, datatype, array, binary?)]. Returns (body, headers) in
    JSON form when no input is binary, else in the binary extension's form."""
    header = {"inputs": []}
    if req_id is not None:
        header["id"] = req_id
    if parameters:
        header["parameters"] = parameters
    if outputs is not None:
        header["outputs"] = outputs
    blobs = []
    for name, datatype, arr, binary in inputs:
        t = {"name": name, "shape": list(np.shape(arr)), "datatype": datatype}
        if binary:
            raw = tensor_bytes(arr, datatype)
            t["parameters"] = {"binary_data_size": len(raw)}
            blobs.append(raw)
        else:
            t["data"] = json_data(arr, datatype)
        header["inputs"].append(t)
    head = json.dumps(header).encode()
    if not blobs:
        return head, {"Content-Type": "application/json"}
    return head + b"".join(blobs), {"Content-Type": "application/octet-stream",
                                    "Inference-Header-Content-Length": str(len(head))}


def parse_v2_response(tc, r):
    """(json header, {output name: array}) of a successful v2 infer response."""
    tc.assertEqual(r.status_code, 200, f"infer failed: {r.text[:500]}")
    hl = r.headers.get("Inference-Header-Content-Length")
    if hl is None:
        tc.assertTrue(r.headers.get("Content-Type", "").startswith("application/json"), r.headers)
        head, rest = r.json(), b""
    else:
        tc.assertTrue(r.headers.get("Content-Type", "").startswith("application/octet-stream"),
                      f"binary response with Content-Type {r.headers.get('Content-Type')}")
        n = int(hl)
        tc.assertLessEqual(n, len(r.content))
        head, rest = json.loads(r.content[:n]), r.content[n:]
    arrays, off = {}, 0
    for o in head["outputs"]:
        size = (o.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            tc.assertIsNone(o.get("data"), f"output {o['name']} has both data and binary_data_size")
            arrays[o["name"]] = tensor_from_bytes(rest[off:off + size], o["datatype"], o["shape"])
            arrays[o["name"] + ":raw"] = bytes(rest[off:off + size])
            off += size
        else:
            tc.assertIn("data", o, f"output {o['name']} has neither data nor binary_data_size")
            arrays[o["name"]] = tensor_from_json(o["data"], o["datatype"], o["shape"])
    tc.assertEqual(off, len(rest), "binary section length differs from the sum of binary_data_size")
    return head, arrays


def assert_identical(tc, got, want, what):
    """Same dtype, shape and bytes (exact float equality, bit for bit)."""
    got, want = np.asarray(got), np.asarray(want)
    tc.assertEqual(got.shape, want.shape, f"{what}: shape")
    if want.dtype == object:
        tc.assertEqual(got.reshape(-1).tolist(), want.reshape(-1).tolist(), f"{what}: values")
        return
    tc.assertEqual(got.dtype.newbyteorder("="), want.dtype.newbyteorder("="), f"{what}: dtype")
    if got.astype(want.dtype).tobytes() != want.tobytes():
        diff = ""
        if want.dtype.kind == "f":
            diff = f"; max |difference| {np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))}"
        tc.fail(f"{what}: values differ from the reference{diff}\n got {got.reshape(-1)[:8]}\nwant "
                f"{want.reshape(-1)[:8]}")


def error_message(tc, r, status):
    """Asserts an error response {"error": "<message>"} with this status; returns the message."""
    expected = status if isinstance(status, (tuple, list, set)) else (status,)
    tc.assertIn(r.status_code, expected, f"expected {expected}, got {r.status_code}: {r.text[:500]}")
    tc.assertTrue(r.headers.get("Content-Type", "").startswith("application/json"),
                  f"error with Content-Type {r.headers.get('Content-Type')}")
    body = r.json()
    tc.assertIsInstance(body, dict)
    tc.assertIsInstance(body.get("error"), str, f"error body {body}")
    tc.assertTrue(body["error"].strip(), "empty error message")
    return body["error"]


def assert_names(tc, message, name):
    """The message names `name` as a word (not as part of a longer word)."""
    tc.assertRegex(message, r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])",
                   f"error message does not name '{name}'")


def parse_metrics(text):
    """Prometheus text -> (families {name: type}, samples [(name, {labels}, value)])."""
    families, samples = {}, []
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    line_re = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$")
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            families[parts[2]] = parts[3]
            continue
        if not line.strip() or line.startswith("#"):
            continue
        m = line_re.match(line)
        if not m:
            raise AssertionError(f"unparsable metrics line: {line!r}")
        labels = dict(label_re.findall(m.group(3) or ""))
        samples.append((m.group(1), labels, float(m.group(4))))
    return families, samples


def metric_sum(samples, name, **labels):
    return sum(v for n, l, v in samples if n == name and all(l.get(k) == str(x) for k, x in labels.items()))


def get_metrics(tc, server):
    r = http(server, "GET", "/metrics")
    tc.assertEqual(r.status_code, 200, r.text[:300])
    return parse_metrics(r.text)


def run_concurrently(fns, timeout=HTTP_TIMEOUT_S * 4):
    """Starts every fn at once (a barrier) on its own thread; returns their
    results in order, re-raising the first exception."""
    barrier = threading.Barrier(len(fns))

    def wrap(fn):
        barrier.wait(timeout=60)
        return fn()

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(fns)) as pool:
        futures = [pool.submit(wrap, fn) for fn in fns]
        done, not_done = concurrent.futures.wait(futures, timeout=timeout)
        if not_done:
            raise AssertionError(f"{len(not_done)} of {len(fns)} concurrent clients did not finish")
        return [f.result() for f in futures]


def wait_for(predicate, what, timeout=60):
    """Polls predicate() (bounded) until it returns a true value; returns it."""
    for _ in range(int(timeout / POLL_INTERVAL_S)):
        v = predicate()
        if v:
            return v
        time.sleep(POLL_INTERVAL_S)
    raise AssertionError(f"timed out waiting for {what}")


def write_token_file(folder, token):
    """An admin token file (mode 0600) in folder; returns its path."""
    path = os.path.join(folder, "token")
    with open(path, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return path


def digits_descriptor(name, model, labels=None, version="v1.0.0"):
    """A YAML descriptor of the demo model at `model` (top-3 labels when given)."""
    text = f"name: {name}\nversion: {version}\nformat: onnx\npath: {model}\n"
    if labels:
        text += f"postprocess:\n  - topk: {{tensor: probabilities, k: 3, labels: {labels}}}\n"
    return text


def digits_v2_body(sample=0):
    """An OIP v2 JSON request for the demo model: one of its samples."""
    return {"inputs": [{"name": "input", "shape": [1, 64], "datatype": "FP32",
                        "data": [float(x) for x in samples()[sample].reshape(-1)]}]}


class TempModelsTestCase(unittest.TestCase):
    """A fresh folder per test holding a copy of the demo model (a model root
    for the servers the test starts with start()); servers stopped and the
    folder removed after each test."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mcp-e2e-" + type(self).__name__.lower() + "-")
        self.models = os.path.join(self.tmp, "models")
        os.mkdir(self.models)
        self.model = os.path.join(self.models, "digits.onnx")
        shutil.copy(DIGITS, self.model)
        self.servers = []

    def tearDown(self):
        for srv in self.servers:
            srv.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, *args):
        srv = Server(*args).start()
        self.servers.append(srv)
        return srv

    def apply(self, srv, name, text, timeout=HTTP_TIMEOUT_S):
        return http(srv, "POST", f"/v2/repository/models/{name}/load", json_body={"parameters": {"config": text}},
                    timeout=timeout)


class ServerTestCase(unittest.TestCase):
    """One server per test class, started in setUpClass, always stopped;
    `server_binary` names another build of the server (default: MCP_SERVER_BIN)."""

    server_binary = None

    @classmethod
    def server_args(cls):
        return ["--model-path", DIGITS]

    @classmethod
    def setUpClass(cls):
        cls.server = Server(*cls.server_args(), binary=cls.server_binary)
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.server.stop()
        if rc != 0:
            raise AssertionError(f"server exited with status {rc} on SIGTERM, not 0\nstderr:\n"
                                 f"{cls.server.stderr_text()}")

    def setUp(self):
        self.assertIsNone(self.server.proc.poll(), "server died:\n" + self.server.stderr_text())

    def call(self, method, path, **kw):
        return http(self.server, method, path, **kw)

    def infer(self, model, inputs, outputs=None, parameters=None, req_id=None, version=None, extra_headers=None):
        body, headers = v2_request(inputs, outputs, parameters, req_id)
        headers.update(extra_headers or {})
        path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
        return self.call("POST", path, body=body, headers=headers)


# ---------------------------------------------------------------------------
# every protocol's happy path on the demo model
# ---------------------------------------------------------------------------

class ProtocolTests(ServerTestCase):
    @classmethod
    def server_args(cls):
        return ["--model-path", DIGITS, "--model-path", model_file("identity_fp32")]

    def expected(self, x):
        return mcpctl_run(DIGITS, input=x)

    def test_startup_lines(self):
        text = self.server.stderr_text()
        self.assertRegex(text, r"mcp2026-server \S+ listening on http://127\.0\.0\.1:\d+")
        for model in ("digits", "identity_fp32"):
            self.assertRegex(text, r"(?m)^.*\b" + model + r"\b.*$", f"no startup line for model {model}")

    def test_health(self):
        r = self.call("GET", "/v2/health/live")
        self.assertEqual(r.status_code, 200)
        self.assertEqual(r.json(), {"live": True})
        r = self.call("GET", "/v2/health/ready")
        self.assertEqual(r.status_code, 200)
        self.assertEqual(r.json(), {"ready": True})

    def test_server_metadata(self):
        r = self.call("GET", "/v2")
        self.assertEqual(r.status_code, 200)
        body = r.json()
        self.assertIsInstance(body["name"], str)
        self.assertIsInstance(body["version"], str)
        for ext in ("binary_tensor_data", "model_repository", "statistics", "schedule_policy"):
            self.assertIn(ext, body["extensions"])

    def test_model_metadata(self):
        r = self.call("GET", "/v2/models/digits")
        self.assertEqual(r.status_code, 200, r.text)
        body = r.json()
        self.assertEqual(body["name"], "digits")
        self.assertEqual(body["platform"], "onnx_onnxv1")
        self.assertEqual(len(body["versions"]), 1)
        self.assertEqual(body["inputs"], [{"name": "input", "datatype": "FP32", "shape": [-1, 64]}])
        self.assertEqual(body["outputs"], [{"name": "probabilities", "datatype": "FP32", "shape": [-1, 10]},
                                           {"name": "label", "datatype": "INT64", "shape": [-1]}])
        version = body["versions"][0]
        r2 = self.call("GET", f"/v2/models/digits/versions/{version}")
        self.assertEqual(r2.status_code, 200, r2.text)
        self.assertEqual(r2.json(), body)

    def test_model_ready(self):
        r = self.call("GET", "/v2/models/digits/ready")
        self.assertEqual(r.status_code, 200, r.text)
        version = self.call("GET", "/v2/models/digits").json()["versions"][0]
        r = self.call("GET", f"/v2/models/digits/versions/{version}/ready")
        self.assertEqual(r.status_code, 200, r.text)

    def test_v2_infer_json_each_sample(self):
        for k, x in enumerate(samples()):
            with self.subTest(sample=k):
                r = self.infer("digits", [("input", "FP32", x, False)], req_id=f"sample-{k}")
                head, out = parse_v2_response(self, r)
                self.assertEqual(head["model_name"], "digits")
                self.assertEqual(head["id"], f"sample-{k}")
                self.assertEqual(sorted(o["name"] for o in head["outputs"]), ["label", "probabilities"])
                want = self.expected(x)
                assert_identical(self, out["probabilities"], want["probabilities"], f"sample {k} probabilities")
                assert_identical(self, out["label"], want["label"], f"sample {k} label")

    def test_v2_infer_json_batch_nested_and_versioned(self):
        x = np.concatenate(samples())
        want = self.expected(x)
        version = self.call("GET", "/v2/models/digits").json()["versions"][0]
        body = {"id": "batch", "parameters": {"priority": 0},
                "inputs": [{"name": "input", "shape": [5, 64], "datatype": "FP32",
                            "data": [[float(v) for v in row] for row in x]}]}  # nested form
        r = self.call("POST", f"/v2/models/digits/versions/{version}/infer", json_body=body)
        head, out = parse_v2_response(self, r)
        self.assertEqual(head["model_name"], "digits")
        if "model_version" in head:
            self.assertEqual(head["model_version"], version)
        assert_identical(self, out["probabilities"], want["probabilities"], "batch probabilities")
        assert_identical(self, out["label"], want["label"], "batch label")

    def test_v2_infer_requested_output_only(self):
        x = samples()[1]
        r = self.infer("digits", [("input", "FP32", x, False)], outputs=[{"name": "label"}])
        head, out = parse_v2_response(self, r)
        self.assertEqual([o["name"] for o in head["outputs"]], ["label"])
        assert_identical(self, out["label"], self.expected(x)["label"], "label")

    def test_v2_infer_binary(self):
        x = np.concatenate(samples()[:3])
        want = self.expected(x)
        r = self.infer("digits", [("input", "FP32", x, True)], parameters={"binary_data_output": True})
        head, out = parse_v2_response(self, r)
        for name in ("probabilities", "label"):
            self.assertIn(name + ":raw", out, f"{name} did not come back binary")
            assert_identical(self, out[name], want[name], name)

    def test_v2_infer_raw_binary_form(self):
        x = samples()[3]
        want = self.expected(x)
        r = self.call("POST", "/v2/models/digits/infer", body=x.astype("<f4").tobytes(),
                      headers={"Inference-Header-Content-Length": "0", "Content-Type": "application/octet-stream"})
        head, out = parse_v2_response(self, r)
        self.assertIsNotNone(r.headers.get("Inference-Header-Content-Length"), "raw form must answer in binary")
        for name in ("probabilities", "label"):
            self.assertIn(name + ":raw", out, f"{name} did not come back binary")
            assert_identical(self, out[name], want[name], name)

    def test_v1_list_and_model(self):
        r = self.call("GET", "/v1/models")
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(sorted(r.json()["models"]), ["digits", "identity_fp32"])
        # KServe v1's fields, and OpenAI's model object on the same path.
        self.assertEqual(sorted(m["id"] for m in r.json()["data"]), ["digits", "identity_fp32"])
        r = self.call("GET", "/v1/models/digits")
        self.assertEqual(r.status_code, 200, r.text)
        d = r.json()
        self.assertEqual({k: d[k] for k in ("name", "ready", "id", "object")},
                         {"name": "digits", "ready": True, "id": "digits", "object": "model"})
        self.assertEqual(set(d), {"name", "ready", "id", "object", "created", "owned_by"})

    def test_v1_predict_instances(self):
        x = np.concatenate(samples())
        want = self.expected(x)
        r = self.call("POST", "/v1/models/digits:predict",
                      json_body={"instances": [[float(v) for v in row] for row in x]})
        self.assertEqual(r.status_code, 200, r.text)
        preds = r.json()["predictions"]
        self.assertEqual(len(preds), 5)
        # TF Serving row format: a model with several outputs answers one
        # object per instance, keyed by output name.
        for k, p in enumerate(preds):
            self.assertIsInstance(p, dict, "multi-output model: each prediction must be {output: value}")
            self.assertEqual(sorted(p), ["label", "probabilities"])
            assert_identical(self, np.asarray(p["probabilities"], dtype=np.float32),
                             want["probabilities"][k], f"instance {k} probabilities")
            assert_identical(self, np.asarray(p["label"], dtype=np.int64), want["label"][k], f"instance {k} label")

    def test_v1_predict_single_output_and_columnar(self):
        x = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
        r = self.call("POST", "/v1/models/identity_fp32:predict", json_body={"instances": x.tolist()})
        self.assertEqual(r.status_code, 200, r.text)
        # One output: the output name is omitted, predictions are its rows.
        assert_identical(self, np.asarray(r.json()["predictions"], dtype=np.float32), x, "row form")
        r = self.call("POST", "/v1/models/identity_fp32:predict", json_body={"inputs": x.tolist()})
        self.assertEqual(r.status_code, 200, r.text)
        body = r.json()
        key = "predictions" if "predictions" in body else "outputs"
        assert_identical(self, np.asarray(body[key], dtype=np.float32), x, "columnar form")

    def test_simple_infer(self):
        x = np.concatenate(samples()[:2])
        want = self.expected(x)
        r = self.call("POST", "/v1/infer",
                      json_body={"input": [float(v) for v in x.reshape(-1)], "shape": [2, 64], "model": "digits"})
        self.assertEqual(r.status_code, 200, r.text)
        body = r.json()
        self.assertEqual(body["model"], "digits")
        self.assertEqual(body["shape"], [2, 10])
        got = np.asarray(body["output"], dtype=np.float32).reshape(body["shape"])
        assert_identical(self, got, want["probabilities"], "output")

    def test_simple_infer_needs_model_when_several_loaded(self):
        r = self.call("POST", "/v1/infer", json_body={"input": [0.0] * 64, "shape": [1, 64]})
        assert_names(self, error_message(self, r, 400), "model")

    def test_statistics(self):
        def stats():
            r = self.call("GET", "/v2/models/digits/stats")
            self.assertEqual(r.status_code, 200, r.text)
            st = r.json()["model_stats"]
            self.assertEqual(len(st), 1)
            self.assertEqual(st[0]["name"], "digits")
            return st[0]
        before = stats()
        for x in samples()[:3]:
            parse_v2_response(self, self.infer("digits", [("input", "FP32", x, False)]))
        after = stats()
        self.assertEqual(after["inference_count"] - before["inference_count"], 3)
        success = [st["inference_stats"]["success"]["count"] for st in (before, after)]
        self.assertEqual(success[1] - success[0], 3)
        self.assertGreaterEqual(after["execution_count"] - before["execution_count"], 1)
        self.assertLessEqual(after["execution_count"] - before["execution_count"], 3)
        r = self.call("GET", "/v2/models/stats")
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(sorted(s["name"] for s in r.json()["model_stats"]), ["digits", "identity_fp32"])
        version = self.call("GET", "/v2/models/digits").json()["versions"][0]
        r = self.call("GET", f"/v2/models/digits/versions/{version}/stats")
        self.assertEqual(r.status_code, 200, r.text)

    def test_statistics_in_tritons_full_shape(self):
        """Every stage Triton reports (queue, compute_input, compute_infer,
        compute_output, success, fail) and batch_stats per batch size, each
        count matching the requests and batches that ran."""
        def stats():
            return self.call("GET", "/v2/models/digits/stats").json()["model_stats"][0]
        before = stats()
        x = samples()[0]
        for rows in (1, 2, 2):
            parse_v2_response(self, self.infer("digits", [("input", "FP32", np.repeat(x, rows, axis=0), False)]))
        after = stats()
        inf = after["inference_stats"]
        for stage in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output"):
            self.assertIn(stage, inf)
        n = after["inference_count"] - before["inference_count"]
        self.assertEqual(n, 5, "rows run")
        for stage in ("queue", "compute_input", "compute_infer", "compute_output"):
            self.assertEqual(inf[stage]["count"] - before["inference_stats"][stage]["count"], n, stage)
            self.assertGreater(inf[stage]["ns"], before["inference_stats"][stage]["ns"], stage)
        sizes = {b["batch_size"]: b for b in after["batch_stats"]}
        old = {b["batch_size"]: b for b in before["batch_stats"]}
        grew = {k: sizes[k]["compute_infer"]["count"] - old.get(k, {"compute_infer": {"count": 0}})["compute_infer"]["count"]
                for k in sizes}
        self.assertGreaterEqual(grew.get(2, 0) + grew.get(4, 0), 1, f"no batch of 2 or 4 rows counted: {sizes}")
        self.assertEqual(sum(k * v for k, v in grew.items()), 5, f"batch_stats do not add up to the rows run: {grew}")
        self.assertEqual(list(sizes), sorted(sizes), "batch_stats not in ascending size")

    def test_model_config(self):
        r = self.call("GET", "/v2/models/digits/config")
        self.assertEqual(r.status_code, 200, r.text)
        cfg = r.json()
        self.assertEqual(cfg["name"], "digits")
        self.assertGreater(cfg["max_batch_size"], 0)  # server default 32: batch dim excluded from dims
        self.assertEqual([(i["name"], i["data_type"], i["dims"]) for i in cfg["input"]],
                         [("input", "TYPE_FP32", [64])])
        self.assertEqual([(o["name"], o["data_type"]) for o in cfg["output"]],
                         [("probabilities", "TYPE_FP32"), ("label", "TYPE_INT64")])

    def test_repository_index_and_describe(self):
        r = self.call("POST", "/v2/repository/index")
        self.assertEqual(r.status_code, 200, r.text)
        index = {e["name"]: e for e in r.json()}
        self.assertEqual(sorted(index), ["digits", "identity_fp32"])
        self.assertEqual(index["digits"]["state"], "READY")
        r = self.call("POST", "/v2/repository/index", json_body={"ready": True})
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(sorted(e["name"] for e in r.json()), ["digits", "identity_fp32"])
        r = self.call("GET", "/v2/repository/models/digits")
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(r.json()["name"], "digits")
        self.assertEqual(r.json()["state"], "READY")

    def test_openapi_document_served(self):
        r = self.call("GET", "/openapi.json")
        self.assertEqual(r.status_code, 200)
        self.assertEqual(r.json(), SPEC, "GET /openapi.json differs from schemas/openapi.json")
        self.assertTrue(str(SPEC.get("openapi", "")).startswith("3.1"), "not an OpenAPI 3.1 document")


# ---------------------------------------------------------------------------
# binary tensor data extension round trips
# ---------------------------------------------------------------------------

ROUND_TRIP_DATA = {
    "FP32": np.array([[1.5, -0.0, 3.4028235e38], [1e-45, -2.25, np.pi]], dtype=np.float32),
    "INT64": np.array([[0, -1, 2 ** 62], [-(2 ** 63), 2 ** 63 - 1, 42]], dtype=np.int64),
    "BOOL": np.array([[True, False, True], [False, False, True]], dtype=bool),
    "BYTES": np.array([[b"hello", b"", "h\xe9llo \u2603".encode()], [b'quote " and \\', b"x" * 300, b"end"]],
                      dtype=object),
    "FP16": np.array([[1.0, -2.5, 65504.0], [6e-08, -0.0, 0.333]], dtype=np.float16),
}
# Non-UTF-8 bytes only travel in binary form.
BYTES_BINARY_ONLY = np.array([[b"\xff\xfe", b"\x80", b"a\xc3(b"]], dtype=object)
MODEL_OF = {"FP32": "identity_fp32", "INT64": "identity_int64", "BOOL": "identity_bool",
            "BYTES": "identity_bytes", "FP16": "identity_fp16"}


class BinaryExtensionTests(ServerTestCase):
    @classmethod
    def server_args(cls):
        args = ["--model-path", DIGITS]
        for m in MODEL_OF.values():
            args += ["--model-path", model_file(m)]
        return args

    def round_trip(self, datatype, x, binary_in, binary_out, how="per_output"):
        outputs, params = None, None
        if how == "per_output":
            outputs = [{"name": "ident_out", "parameters": {"binary_data": binary_out}}]
        elif how == "request":
            params = {"binary_data_output": binary_out}
        r = self.infer(MODEL_OF[datatype], [("ident_in", datatype, x, binary_in)], outputs=outputs,
                       parameters=params)
        head, out = parse_v2_response(self, r)
        self.assertEqual(len(head["outputs"]), 1)
        o = head["outputs"][0]
        self.assertEqual((o["name"], o["datatype"], o["shape"]), ("ident_out", datatype, list(x.shape)))
        if binary_out:
            self.assertIn("ident_out:raw", out, "output not sent in binary form")
            self.assertEqual(out["ident_out:raw"], tensor_bytes(x, datatype), "binary bytes differ")
            self.assertEqual(int(r.headers["Inference-Header-Content-Length"]),
                             len(r.content) - len(out["ident_out:raw"]))
        else:
            self.assertNotIn("ident_out:raw", out, "output sent binary though JSON was asked for")
        assert_identical(self, out["ident_out"], x, f"{datatype} round trip")

    def test_binary_in_binary_out(self):
        for datatype, x in ROUND_TRIP_DATA.items():
            with self.subTest(datatype=datatype):
                self.round_trip(datatype, x, True, True)

    def test_binary_in_binary_out_by_request_parameter(self):
        for datatype, x in ROUND_TRIP_DATA.items():
            with self.subTest(datatype=datatype):
                self.round_trip(datatype, x, True, True, how="request")

    def test_bytes_non_utf8(self):
        self.round_trip("BYTES", BYTES_BINARY_ONLY, True, True)

    def test_bytes_with_nul(self):
        """NUL inside a BYTES element: either it round-trips, or (the engine's
        string tensors cannot hold NUL) a 400 that names the tensor; never a
        truncated or altered answer."""
        x = np.array([[b"a\x00b", b"\x00", b"c"]], dtype=object)
        r = self.infer("identity_bytes", [("ident_in", "BYTES", x, True)],
                       outputs=[{"name": "ident_out", "parameters": {"binary_data": True}}])
        if r.status_code == 400:
            assert_names(self, error_message(self, r, 400), "ident_in")
            return
        head, out = parse_v2_response(self, r)
        self.assertEqual(out["ident_out:raw"], tensor_bytes(x, "BYTES"))

    def test_json_forms(self):
        # JSON carries FP32, INT64, BOOL and (UTF-8) BYTES faithfully.
        for datatype in ("FP32", "INT64", "BOOL", "BYTES"):
            x = ROUND_TRIP_DATA[datatype]
            for binary_in, binary_out in ((False, False), (True, False), (False, True)):
                with self.subTest(datatype=datatype, binary_in=binary_in, binary_out=binary_out):
                    self.round_trip(datatype, x, binary_in, binary_out)

    def test_default_is_json_output(self):
        for datatype in ("FP32", "INT64", "BOOL", "BYTES"):
            with self.subTest(datatype=datatype):
                self.round_trip(datatype, ROUND_TRIP_DATA[datatype], True, False, how="none")

    def test_per_output_setting_wins(self):
        x = ROUND_TRIP_DATA["INT64"]
        r = self.infer("identity_int64", [("ident_in", "INT64", x, True)],
                       outputs=[{"name": "ident_out", "parameters": {"binary_data": False}}],
                       parameters={"binary_data_output": True})
        head, out = parse_v2_response(self, r)
        self.assertNotIn("ident_out:raw", out, "per-output binary_data=false must win over binary_data_output")
        assert_identical(self, out["ident_out"], x, "INT64")

    def test_raw_form_each_dtype(self):
        for datatype in ("FP32", "INT64", "BOOL", "FP16"):
            x = ROUND_TRIP_DATA[datatype][:1]  # batch 1
            with self.subTest(datatype=datatype):
                r = self.call("POST", f"/v2/models/{MODEL_OF[datatype]}/infer", body=tensor_bytes(x, datatype),
                              headers={"Inference-Header-Content-Length": "0",
                                       "Content-Type": "application/octet-stream"})
                head, out = parse_v2_response(self, r)
                self.assertIn("ident_out:raw", out, "raw form must answer in binary")
                self.assertEqual(out["ident_out:raw"], tensor_bytes(x, datatype))
                self.assertEqual(head["outputs"][0]["shape"], [1, 3])

    def test_mixed_binary_and_json_outputs(self):
        x = np.concatenate(samples()[:2])
        want = mcpctl_run(DIGITS, input=x)
        r = self.infer("digits", [("input", "FP32", x, True)],
                       outputs=[{"name": "probabilities", "parameters": {"binary_data": False}},
                                {"name": "label", "parameters": {"binary_data": True}}])
        head, out = parse_v2_response(self, r)
        self.assertNotIn("probabilities:raw", out)
        self.assertIn("label:raw", out)
        assert_identical(self, out["probabilities"], want["probabilities"], "probabilities")
        assert_identical(self, out["label"], want["label"], "label")


# ---------------------------------------------------------------------------
# error paths
# ---------------------------------------------------------------------------

def offset_in(message):
    """The byte offset an error message names ("offset 41", "byte 41", "at byte offset 41")."""
    m = re.search(r"(?:offset|byte)\D{0,12}?(\d+)", message)
    return int(m.group(1)) if m else None


class ErrorTests(ServerTestCase):
    @classmethod
    def server_args(cls):
        return ["--model-path", DIGITS, "--model-path", model_file("identity_fp32"),
                "--model-path", model_file("identity_int64"), "--model-path", model_file("add_two")]

    def assert_error(self, r, status, *names):
        msg = error_message(self, r, status)
        for n in names:
            assert_names(self, msg, n)
        return msg

    def test_unknown_model_404(self):
        good = {"inputs": [{"name": "input", "shape": [1, 64], "datatype": "FP32", "data": [0.0] * 64}]}
        cases = [
            ("POST", "/v2/models/no_such_model/infer", good),
            ("GET", "/v2/models/no_such_model", None),
            ("GET", "/v2/models/no_such_model/stats", None),
            ("GET", "/v2/models/no_such_model/config", None),
            ("GET", "/v1/models/no_such_model", None),
            ("POST", "/v1/models/no_such_model:predict", {"instances": [[0.0] * 64]}),
            ("POST", "/v1/infer", {"input": [0.0] * 64, "shape": [1, 64], "model": "no_such_model"}),
            ("GET", "/v2/repository/models/no_such_model", None),
        ]
        for method, path, body in cases:
            with self.subTest(path=path):
                r = self.call(method, path, json_body=body)
                self.assert_error(r, 404, "no_such_model")

    def test_unknown_model_not_ready(self):
        r = self.call("GET", "/v2/models/no_such_model/ready")
        self.assertEqual(r.status_code, 404, r.text)

    def test_unknown_version_404(self):
        x = samples()[0]
        r = self.infer("digits", [("input", "FP32", x, False)], version="999")
        self.assert_error(r, 404, "999")

    def test_unknown_route_404(self):
        # The only responses not checked against the OpenAPI document: it can
        # describe the routes that exist, not every one that does not. The
        # error body's form is checked here instead.
        for method, path in (("GET", "/v3/nothing"), ("GET", "/v2/models/digits/nothing"), ("POST", "/metrics")):
            with self.subTest(path=path, method=method):
                error_message(self, self.call(method, path, validate=False), (404, 405))

    def test_wrong_method_405_with_allow(self):
        """A known path with another method is 405 with the methods it takes
        in Allow (the route table knows them), not 404."""
        cases = (("POST", "/metrics", "GET, HEAD"), ("GET", "/v2/models/digits/infer", "POST"),
                 ("DELETE", "/v2/models/digits", "GET, HEAD"), ("GET", "/v2/repository/index", "POST"),
                 ("PUT", "/v1/models/digits:predict", "POST"), ("GET", "/v2/models/digits/versions/1/infer", "POST"))
        for method, path, allow in cases:
            with self.subTest(method=method, path=path):
                r = self.call(method, path, validate=False)
                msg = error_message(self, r, 405)
                self.assertEqual(r.headers.get("Allow"), allow)
                self.assertIn(method, msg)

    def test_head_on_every_get_route(self):
        for path in ("/v2", "/v2/health/live", "/v2/health/ready", "/v2/models/digits", "/v2/models/digits/ready",
                     "/v2/models/digits/config", "/v2/models/stats", "/v1/models", "/metrics", "/openapi.json"):
            with self.subTest(path=path):
                get = self.call("GET", path)
                head = self.call("HEAD", path, validate=False)
                self.assertEqual(head.status_code, get.status_code)
                self.assertEqual(head.content, b"")
                self.assertEqual(head.headers.get("Content-Type"), get.headers.get("Content-Type"))

    def check_malformed(self, path, body, start, length):
        r = self.call("POST", path, body=body, headers={"Content-Type": "application/json"})
        msg = error_message(self, r, 400)
        off = offset_in(msg)
        self.assertIsNotNone(off, f"message does not name a byte offset: {msg}")
        # The offset points into the offending token or just after it
        # (parsers report where they stopped reading it).
        self.assertTrue(start <= off <= start + length,
                        f"offset {off} is not at the bad token {body[start:start + length]!r} "
                        f"(bytes {start}..{start + length}): {msg}")

    def test_malformed_json_names_byte_offset(self):
        v2 = b'{"inputs": [{"name": "input", "shape": [1, 64], "datatype": "FP32", "data": [1.0, 2.0,, 3.0]}]}'
        v1 = b'{"instances": [[1.0, 2.0], [3.0 4.0]]}'
        simple = b'{"input": [1.0, 2.0], "shape": [1, 2], "model": "digits" x}'
        load = b'{"parameters": {"config": "name: x"},}'
        # (path, body, start of the offending token, its length)
        cases = [
            ("/v2/models/digits/infer", v2, v2.index(b",,") + 1, 1),
            ("/v1/models/digits:predict", v1, v1.index(b"4.0"), 3),
            ("/v1/infer", simple, simple.index(b"x}"), 1),
            ("/v2/repository/models/digits/load", load, load.index(b",}") + 1, 1),
        ]
        for path, body, start, length in cases:
            with self.subTest(path=path):
                self.check_malformed(path, body, start, length)

    def test_truncated_json_names_end_offset(self):
        body = b'{"inputs": [{"name": "input", "shape": [1, 64]'
        r = self.call("POST", "/v2/models/digits/infer", body=body, headers={"Content-Type": "application/json"})
        msg = error_message(self, r, 400)
        self.assertIn(offset_in(msg), (len(body) - 1, len(body)), f"offset of the end not named: {msg}")

    def test_json_not_a_request(self):
        for body in (b"[1, 2, 3]", b'{"inputs": 5}', b'{"inputs": [{"name": "ident_in"}]}', b""):
            with self.subTest(body=body):
                error_message(self, self.call("POST", "/v2/models/identity_fp32/infer", body=body,
                                              headers={"Content-Type": "application/json"}), 400)

    def test_wrong_shape_names_tensor(self):
        x = np.zeros((1, 63), dtype=np.float32)
        self.assert_error(self.infer("digits", [("input", "FP32", x, False)]), 400, "input")
        x = np.zeros((1, 4), dtype=np.float32)
        self.assert_error(self.infer("identity_fp32", [("ident_in", "FP32", x, False)]), 400, "ident_in")
        self.assert_error(self.infer("identity_fp32", [("ident_in", "FP32", x, True)]), 400, "ident_in")
        x = np.zeros((3,), dtype=np.float32)  # rank 1 for a rank-2 input
        self.assert_error(self.infer("identity_fp32", [("ident_in", "FP32", x, False)]), 400, "ident_in")

    def test_data_count_differs_from_shape(self):
        body = {"inputs": [{"name": "ident_in", "shape": [1, 3], "datatype": "FP32",
                            "data": [1.0, 2.0, 3.0, 4.0, 5.0]}]}
        self.assert_error(self.call("POST", "/v2/models/identity_fp32/infer", json_body=body), 400, "ident_in")

    def test_wrong_dtype_names_tensor(self):
        x = np.zeros((1, 64), dtype=np.int32)
        self.assert_error(self.infer("digits", [("input", "INT32", x, False)]), 400, "input")
        x = np.zeros((1, 3), dtype=np.int64)
        self.assert_error(self.infer("identity_fp32", [("ident_in", "INT64", x, False)]), 400, "ident_in")
        self.assert_error(self.infer("identity_fp32", [("ident_in", "INT64", x, True)]), 400, "ident_in")
        body = {"inputs": [{"name": "ident_in", "shape": [1, 3], "datatype": "FLOAT99", "data": [1, 2, 3]}]}
        self.assert_error(self.call("POST", "/v2/models/identity_fp32/infer", json_body=body), 400, "ident_in")

    def test_json_values_of_wrong_type(self):
        for data in (["a", "b", "c"], [1.5, 2.0, 3.0], [True, None, 1]):
            with self.subTest(data=data):
                body = {"inputs": [{"name": "ident_in", "shape": [1, 3], "datatype": "INT64", "data": data}]}
                self.assert_error(self.call("POST", "/v2/models/identity_int64/infer", json_body=body),
                                  400, "ident_in")

    def test_unknown_and_missing_input_names_tensor(self):
        x = np.zeros((1, 3), dtype=np.float32)
        self.assert_error(self.infer("identity_fp32", [("bogus_in", "FP32", x, False)]), 400, "bogus_in")
        self.assert_error(self.call("POST", "/v2/models/identity_fp32/infer", json_body={"inputs": []}),
                          400, "inputs")
        self.assert_error(self.infer("identity_fp32", [("ident_in", "FP32", x, False),
                                                       ("ident_in", "FP32", x, False)]), 400, "ident_in")
        # Two-input model, one input left out: the message names the missing one.
        self.assert_error(self.infer("add_two", [("lhs", "FP32", x, False)]), 400, "rhs")
        self.assert_error(self.infer("add_two", [("rhs", "FP32", x, True)]), 400, "lhs")
        # Both given: works, and computes lhs + rhs.
        y = np.arange(3, dtype=np.float32).reshape(1, 3)
        head, out = parse_v2_response(self, self.infer("add_two", [("lhs", "FP32", x + 1, False),
                                                                    ("rhs", "FP32", y, True)]))
        assert_identical(self, out["sum"], mcpctl_run(model_file("add_two"), lhs=x + 1, rhs=y)["sum"], "sum")

    def test_unknown_output_names_tensor(self):
        x = np.zeros((1, 3), dtype=np.float32)
        r = self.infer("identity_fp32", [("ident_in", "FP32", x, False)], outputs=[{"name": "bogus_out"}])
        self.assert_error(r, 400, "bogus_out")

    def test_binary_size_errors(self):
        x = np.zeros((1, 3), dtype=np.float32)
        head = json.dumps({"inputs": [{"name": "ident_in", "shape": [1, 3], "datatype": "FP32",
                                       "parameters": {"binary_data_size": 8}}]}).encode()
        r = self.call("POST", "/v2/models/identity_fp32/infer", body=head + x.tobytes()[:8],
                      headers={"Inference-Header-Content-Length": str(len(head))})
        self.assert_error(r, 400, "ident_in")
        # Header length beyond the body.
        body, headers = v2_request([("ident_in", "FP32", x, True)])
        headers["Inference-Header-Content-Length"] = str(len(body) + 10)
        msg = error_message(self, self.call("POST", "/v2/models/identity_fp32/infer", body=body, headers=headers), 400)
        self.assertIn("Inference-Header-Content-Length", msg)
        # Binary bytes missing: binary_data_size larger than what follows.
        head = json.dumps({"inputs": [{"name": "ident_in", "shape": [1, 3], "datatype": "FP32",
                                       "parameters": {"binary_data_size": 12}}]}).encode()
        r = self.call("POST", "/v2/models/identity_fp32/infer", body=head + x.tobytes()[:4],
                      headers={"Inference-Header-Content-Length": str(len(head))})
        self.assert_error(r, 400, "ident_in")
        # Bytes left over after the last tensor.
        r = self.call("POST", "/v2/models/identity_fp32/infer", body=head + x.tobytes() + b"xx",
                      headers={"Inference-Header-Content-Length": str(len(head))})
        error_message(self, r, 400)
        # Not a number.
        r = self.call("POST", "/v2/models/identity_fp32/infer", body=head + x.tobytes(),
                      headers={"Inference-Header-Content-Length": "twelve"})
        self.assertIn("Inference-Header-Content-Length", error_message(self, r, 400))

    def test_raw_form_wrong_size(self):
        r = self.call("POST", "/v2/models/identity_fp32/infer", body=b"\x00" * 13,
                      headers={"Inference-Header-Content-Length": "0"})
        self.assert_error(r, 400, "ident_in")

    def test_v1_and_simple_bad_shapes(self):
        r = self.call("POST", "/v1/models/digits:predict", json_body={"instances": [[0.0] * 63]})
        self.assert_error(r, 400, "input")
        r = self.call("POST", "/v1/models/digits:predict", json_body={"instances": [[0.0] * 64, [0.0] * 10]})
        error_message(self, r, 400)
        r = self.call("POST", "/v1/models/digits:predict", json_body={"rows": []})
        self.assertIn("instances", error_message(self, r, 400))
        r = self.call("POST", "/v1/infer", json_body={"input": [0.0] * 10, "shape": [1, 64], "model": "digits"})
        error_message(self, r, 400)
        r = self.call("POST", "/v1/infer", json_body={"input": [0.0] * 63, "shape": [1, 63], "model": "digits"})
        self.assert_error(r, 400, "input")

    def test_server_survives_errors(self):
        # After all of the above (in any order) the server still answers correctly.
        x = samples()[4]
        head, out = parse_v2_response(self, self.infer("digits", [("input", "FP32", x, False)]))
        assert_identical(self, out["probabilities"], mcpctl_run(DIGITS, input=x)["probabilities"], "probabilities")


class BodyLimitTests(ServerTestCase):
    LIMIT = 1024

    @classmethod
    def server_args(cls):
        return ["--model-path", DIGITS, "--max-body-bytes", cls.LIMIT]

    def digits_body(self, pad_to=None):
        x = samples()[0]
        body = json.dumps({"inputs": [{"name": "input", "shape": [1, 64], "datatype": "FP32",
                                       "data": [float(v) for v in x.reshape(-1)]}]}, separators=(",", ":")).encode()
        if pad_to is not None:
            self.assertLessEqual(len(body), pad_to)
            body = body[:-1] + b" " * (pad_to - len(body)) + body[-1:]  # JSON whitespace
        return body

    def test_oversize_body_413(self):
        cases = [
            ("/v2/models/digits/infer", self.digits_body(pad_to=4 * self.LIMIT), "application/json"),
            ("/v1/models/digits:predict", b'{"instances": [' + b" " * 4096 + b"]}", "application/json"),
            ("/v1/infer", b'{"input": [' + b" " * 4096 + b'], "shape": [1, 64]}', "application/json"),
            ("/v2/models/digits/infer", b"\x00" * (self.LIMIT + 1), "application/octet-stream"),
        ]
        for path, body, ctype in cases:
            with self.subTest(path=path, size=len(body)):
                r = self.call("POST", path, body=body, headers={"Content-Type": ctype})
                msg = error_message(self, r, 413)
                self.assertIn(str(self.LIMIT), msg, "413 message should name the limit")

    def test_oversize_chunked_body_413(self):
        def chunks():
            for _ in range(8):
                yield b" " * 512
            yield b"{}"
        r = self.call("POST", "/v2/models/digits/infer", body=chunks(), headers={"Content-Type": "application/json"})
        error_message(self, r, 413)

    def test_body_at_limit_accepted(self):
        body = self.digits_body(pad_to=self.LIMIT)
        self.assertEqual(len(body), self.LIMIT)
        r = self.call("POST", "/v2/models/digits/infer", body=body, headers={"Content-Type": "application/json"})
        head, out = parse_v2_response(self, r)
        assert_identical(self, out["probabilities"], mcpctl_run(DIGITS, input=samples()[0])["probabilities"],
                         "probabilities")


def slow_input(k, n=1):
    """A distinct [1, n, 256] FP32 input for the slow model; its run time grows with n."""
    return np.random.default_rng(1000 + k).standard_normal((1, n, 256)).astype(np.float32)


# n for requests that must stay in flight while the test acts: long enough
# (about 0.25 s in a Release build here) that the server's hang-up watcher
# (every 20 ms) and the test's metric polls fit inside one such request.
LONG = 128


class QueueFullTests(ServerTestCase):
    CLIENTS = 24

    @classmethod
    def server_args(cls):
        return ["--model-path", model_file("slow"), "--workers", 1, "--max-queue-size", 1, "--max-batch-size", 1]

    def test_full_queue_429(self):
        x = slow_input(0)
        want = mcpctl_run(model_file("slow"), x=x)["y"]

        def client():
            body, headers = v2_request([("x", "FP32", x, False)])
            with requests.Session() as s:
                return http(self.server, "POST", "/v2/models/slow/infer", body=body, headers=headers, session=s)

        before = get_metrics(self, self.server)[1]
        responses = run_concurrently([client] * self.CLIENTS)
        codes = [r.status_code for r in responses]
        self.assertTrue(set(codes) <= {200, 429}, f"unexpected statuses {codes}")
        self.assertIn(429, codes, f"no 429 from {self.CLIENTS} concurrent requests on a queue of 1: {codes}")
        self.assertIn(200, codes, f"no request succeeded: {codes}")
        for r in responses:
            if r.status_code == 429:
                assert_names(self, error_message(self, r, 429), "slow")
            else:
                head, out = parse_v2_response(self, r)
                assert_identical(self, out["y"], want, "slow model output")
        after = get_metrics(self, self.server)[1]
        n429 = codes.count(429)
        self.assertEqual(metric_sum(after, "mcp_requests_total", model="slow", protocol="v2", code="429")
                         - metric_sum(before, "mcp_requests_total", model="slow", protocol="v2", code="429"), n429)
        self.assertEqual(metric_sum(after, "mcp_inference_errors_total", model="slow", reason="queue_full")
                         - metric_sum(before, "mcp_inference_errors_total", model="slow", reason="queue_full"), n429)


class TimeoutTests(ServerTestCase):
    @classmethod
    def server_args(cls):
        return ["--model-path", model_file("slow"), "--workers", 1, "--max-batch-size", 1]

    def stats(self):
        r = self.call("GET", "/v2/models/slow/stats")
        self.assertEqual(r.status_code, 200, r.text)
        return r.json()["model_stats"][0]

    def test_generous_timeout_succeeds(self):
        x = slow_input(1)
        r = self.infer("slow", [("x", "FP32", x, False)], parameters={"timeout": 600_000_000})
        head, out = parse_v2_response(self, r)
        assert_identical(self, out["y"], mcpctl_run(model_file("slow"), x=x)["y"], "y")

    def test_tiny_timeout_fails_without_running(self):
        """A request whose `timeout` (µs) passes while it waits behind a running
        one fails with 504 Gateway Timeout (the server maps DEADLINE_EXCEEDED to
        504; Triton answers a timed-out queued request with an error too) and a
        message saying it timed out; it never runs."""
        before_stats = self.stats()
        before = get_metrics(self, self.server)[1]
        x = slow_input(2, LONG)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            body, headers = v2_request([("x", "FP32", x, False)])
            blocker = pool.submit(http, self.server, "POST", "/v2/models/slow/infer", body=body, headers=headers)
            # Usually the timed request then waits behind the blocking one; it
            # must fail without running even when the worker is idle.
            wait_for(lambda: blocker.done() or
                     metric_sum(get_metrics(self, self.server)[1], "mcp_inflight_requests") >= 1,
                     "the blocking request to be in flight")
            r = self.infer("slow", [("x", "FP32", slow_input(3), False)], parameters={"timeout": 1})
            msg = error_message(self, r, 504)
            self.assertRegex(msg.lower(), r"time(d)? ?out|deadline", f"message does not say it timed out: {msg}")
            done = blocker.result(timeout=HTTP_TIMEOUT_S)
        head, out = parse_v2_response(self, done)
        assert_identical(self, out["y"], mcpctl_run(model_file("slow"), x=x)["y"], "blocking request y")
        after_stats = self.stats()
        self.assertEqual(after_stats["inference_count"] - before_stats["inference_count"], 1,
                         "the timed-out request ran anyway (or the blocking one did not)")
        after = get_metrics(self, self.server)[1]
        self.assertEqual(metric_sum(after, "mcp_inference_errors_total", model="slow", reason="timeout")
                         - metric_sum(before, "mcp_inference_errors_total", model="slow", reason="timeout"), 1)


    def test_client_disconnect_cancels_pending_request(self):
        """A client that hangs up while its request waits in the queue cancels
        it: the request never runs."""
        before_stats = self.stats()
        x = slow_input(4, LONG)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            body, headers = v2_request([("x", "FP32", x, False)])
            blocker = pool.submit(http, self.server, "POST", "/v2/models/slow/infer", body=body, headers=headers)
            wait_for(lambda: metric_sum(get_metrics(self, self.server)[1], "mcp_inflight_requests") >= 1,
                     "the blocking request to be in flight")
            body, _ = v2_request([("x", "FP32", slow_input(5), False)])
            head = (f"POST /v2/models/slow/infer HTTP/1.1\r\nHost: 127.0.0.1:{self.server.port}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
            sock = socket.create_connection(("127.0.0.1", self.server.port), timeout=30)
            try:
                sock.sendall(head + body)
                state = wait_for(lambda: "blocker finished" if blocker.done() else "both in flight" if metric_sum(
                    get_metrics(self, self.server)[1], "mcp_inflight_requests") >= 2 else None,
                    "the second request to be in flight")
            finally:
                sock.close()
            done = blocker.result(timeout=HTTP_TIMEOUT_S)
        parse_v2_response(self, done)
        if state != "both in flight":
            self.skipTest("the blocking request finished before the second one queued behind it; "
                          "raise SLOW_ITERATIONS in tools/make_e2e_models.py for this machine")
        wait_for(lambda: metric_sum(get_metrics(self, self.server)[1], "mcp_inflight_requests") == 0,
                 "the abandoned request to be cleaned up")
        self.assertEqual(self.stats()["inference_count"] - before_stats["inference_count"], 1,
                         "the request of a client that hung up ran anyway")


# ---------------------------------------------------------------------------
# model repository: load, unload, reload
# ---------------------------------------------------------------------------

class RepositoryServerTestCase(ServerTestCase):
    """A server on a temporary --model-repository that fill_repository()
    populates before the server starts; removed afterwards."""

    @classmethod
    def fill_repository(cls, repo_dir):
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        cls.repo_dir = tempfile.mkdtemp(prefix="mcp-e2e-repo-")
        try:
            cls.fill_repository(cls.repo_dir)
            super().setUpClass()
        except BaseException:
            shutil.rmtree(cls.repo_dir, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            shutil.rmtree(cls.repo_dir, ignore_errors=True)

    @classmethod
    def server_args(cls):
        # The descriptors name the generated and the demo models: both
        # folders are model roots beside the repository.
        return ["--model-repository", cls.repo_dir, "--model-root", MODELS_DIR, "--model-root", DEMO_DIR]


class RepositoryTests(RepositoryServerTestCase):
    @classmethod
    def fill_repository(cls, repo_dir):
        shutil.copy(model_file("identity_fp32"), os.path.join(repo_dir, "identity_fp32.onnx"))
        with open(os.path.join(repo_dir, "e2e_ident.yaml"), "w") as f:
            f.write("name: e2e_ident\nformat: onnx\npath: identity_fp32.onnx\nmax_batch_size: 8\n")

    def index(self, ready=None):
        r = self.call("POST", "/v2/repository/index", json_body=None if ready is None else {"ready": ready})
        self.assertEqual(r.status_code, 200, r.text)
        return {e["name"]: e for e in r.json()}

    def infer_ident(self, model, dtype="FP32"):
        x = np.arange(6).reshape(2, 3).astype(NP_DTYPE[dtype])
        return x, self.infer(model, [("ident_in", dtype, x, False)])

    def assert_serves(self, model, dtype="FP32"):
        x, r = self.infer_ident(model, dtype)
        head, out = parse_v2_response(self, r)
        assert_identical(self, out["ident_out"], x, f"{model} output")

    def test_load_unload_reload(self):
        index = self.index()
        self.assertIn("e2e_ident", index)
        self.assertEqual(index["e2e_ident"]["state"], "READY", index["e2e_ident"])
        self.assertEqual(index["e2e_ident"]["version"], "v1.0.0")
        self.assert_serves("e2e_ident")

        r = self.call("POST", "/v2/repository/models/e2e_ident/unload")
        self.assertEqual(r.status_code, 200, r.text)
        index = self.index()
        self.assertEqual(index["e2e_ident"]["state"], "UNAVAILABLE", index["e2e_ident"])
        with self.subTest('index with {"ready": true} lists only READY models'):
            self.assertNotIn("e2e_ident", self.index(ready=True))
        _, r = self.infer_ident("e2e_ident")
        assert_names(self, error_message(self, r, (503, 404)), "e2e_ident")
        self.assertNotEqual(self.call("GET", "/v2/models/e2e_ident/ready").status_code, 200)
        self.assertNotIn("e2e_ident", self.call("GET", "/v1/models").json()["models"])

        r = self.call("POST", "/v2/repository/models/e2e_ident/load")
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(self.index()["e2e_ident"]["state"], "READY")
        self.assertEqual(self.call("GET", "/v2/models/e2e_ident/ready").status_code, 200)
        self.assert_serves("e2e_ident")

    def descriptor(self, name, model, version=None):
        text = f"name: {name}\nformat: onnx\npath: {model_file(model)}\nmax_batch_size: 4\n"
        if version:
            text += f"version: {version}\n"
        return {"parameters": {"config": text}}

    def test_load_with_descriptor_config(self):
        r = self.call("POST", "/v2/repository/models/e2e_cfg/load",
                      json_body=self.descriptor("e2e_cfg", "identity_int64"))
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(self.index()["e2e_cfg"]["state"], "READY")
        self.assert_serves("e2e_cfg", "INT64")
        r = self.call("GET", "/v2/repository/models/e2e_cfg")
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual((r.json()["name"], r.json()["state"]), ("e2e_cfg", "READY"))
        meta = self.call("GET", "/v2/models/e2e_cfg").json()
        self.assertEqual(meta["versions"], ["v1.0.0"])

        # Reload as a new version: it becomes current.
        r = self.call("POST", "/v2/repository/models/e2e_cfg/load",
                      json_body=self.descriptor("e2e_cfg", "identity_int64", "v1.1.0"))
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(self.call("GET", "/v2/models/e2e_cfg").json()["versions"], ["v1.1.0"])
        self.assertEqual(self.index()["e2e_cfg"]["version"], "v1.1.0")
        self.assert_serves("e2e_cfg", "INT64")

        r = self.call("POST", "/v2/repository/models/e2e_cfg/unload")
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(self.index()["e2e_cfg"]["state"], "UNAVAILABLE")
        _, r = self.infer_ident("e2e_cfg", "INT64")
        assert_names(self, error_message(self, r, (503, 404)), "e2e_cfg")

    def test_load_errors(self):
        r = self.call("POST", "/v2/repository/models/other_name/load",
                      json_body=self.descriptor("e2e_x", "identity_fp32"))
        msg = error_message(self, r, 400)
        assert_names(self, msg, "other_name")
        assert_names(self, msg, "e2e_x")

        bad = {"parameters": {"config": "name: e2e_bad\nformat: tensorflow\npath: x.onnx\n"}}
        msg = error_message(self, self.call("POST", "/v2/repository/models/e2e_bad/load", json_body=bad), 400)
        assert_names(self, msg, "format")
        self.assertRegex(msg, r":2:\d+", "descriptor errors carry line:column")

        missing = {"parameters": {"config": f"name: e2e_missing\nformat: onnx\npath: {MODELS_DIR}/nope.onnx\n"}}
        r = self.call("POST", "/v2/repository/models/e2e_missing/load", json_body=missing)
        self.assertGreaterEqual(r.status_code, 400)
        self.assertIn("nope.onnx", error_message(self, r, (400, 404, 500, 503)))

        r = self.call("POST", "/v2/repository/models/e2e_unknown/load")
        assert_names(self, error_message(self, r, 404), "e2e_unknown")
        r = self.call("POST", "/v2/repository/models/e2e_unknown/unload")
        assert_names(self, error_message(self, r, 404), "e2e_unknown")
        r = self.call("POST", "/v2/repository/models/e2e_ident/load", json_body={"parameters": {"config": 5}})
        assert_names(self, error_message(self, r, 400), "config")
        # Nothing above disturbed the loaded model.
        self.assert_serves("e2e_ident")


# ---------------------------------------------------------------------------
# graceful shutdown
# ---------------------------------------------------------------------------

class ReadyCountersTests(ServerTestCase):
    """A model's series exist at 0 from the moment it is ready, so the first
    requests show in rate() and increase()."""

    def test_series_at_zero_before_any_request(self):
        _, samples_ = get_metrics(self, self.server)
        def value(name, **labels):
            found = [v for n, l, v in samples_ if n == name and all(l.get(k) == str(x) for k, x in labels.items())]
            self.assertTrue(found, f"no {name} series with {labels}")
            return sum(found)
        for proto in ("v2", "v1", "simple", "grpc"):
            self.assertEqual(value("mcp_requests_total", model="digits", protocol=proto, code="200"), 0)
        for reason in ("invalid_input", "queue_full", "timeout", "internal"):
            self.assertEqual(value("mcp_inference_errors_total", model="digits", reason=reason), 0)
        self.assertEqual(value("mcp_request_duration_seconds_count", model="digits"), 0)
        self.assertEqual(value("mcp_queue_duration_seconds_count", model="digits"), 0)
        # And the first request moves them.
        parse_v2_response(self, self.infer("digits", [("input", "FP32", samples()[0], False)]))
        _, samples_ = get_metrics(self, self.server)
        self.assertEqual(value("mcp_requests_total", model="digits", protocol="v2", code="200"), 1)


class ReloadByNameTests(ServerTestCase):
    """A model unloaded through the repository API loads again by name,
    whatever it came from: --model-path, or a descriptor sent to the API."""

    @classmethod
    def server_args(cls):
        return ["--model-path", DIGITS, "--model-root", MODELS_DIR]

    def cycle(self, name):
        self.assertEqual(self.call("POST", f"/v2/repository/models/{name}/unload").status_code, 200)
        self.assertEqual(self.call("GET", f"/v2/models/{name}/ready").status_code, 404)
        r = self.call("POST", f"/v2/repository/models/{name}/load")
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(self.call("GET", f"/v2/models/{name}/ready").status_code, 200)

    def test_model_path_model(self):
        self.cycle("digits")
        parse_v2_response(self, self.infer("digits", [("input", "FP32", samples()[0], False)]))

    def test_applied_descriptor(self):
        text = f"name: applied_ident\npath: {model_file('identity_fp32')}\nmax_batch_size: 4\n"
        r = self.call("POST", "/v2/repository/models/applied_ident/load", json_body={"parameters": {"config": text}})
        self.assertEqual(r.status_code, 200, r.text)
        self.cycle("applied_ident")
        cfg = self.call("GET", "/v2/models/applied_ident/config").json()
        self.assertEqual(cfg["max_batch_size"], 4, "the reload did not use the descriptor that was sent")


class ShutdownTests(unittest.TestCase):
    def start(self, *extra):
        server = Server("--model-path", model_file("slow"), "--workers", 1, "--max-batch-size", 1, *extra)
        server.start()
        self.addCleanup(server.kill)
        return server

    def test_sigterm_drains_in_flight_requests(self):
        server = self.start()
        n = 4
        xs = [slow_input(10 + k, LONG) for k in range(n)]
        want = mcpctl_run(model_file("slow"), x=np.concatenate(xs))["y"]

        def client(k):
            def run():
                body, headers = v2_request([("x", "FP32", xs[k], False)], req_id=f"drain-{k}")
                with requests.Session() as s:
                    return http(server, "POST", "/v2/models/slow/infer", body=body, headers=headers, session=s)
            return run

        with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
            futures = [pool.submit(client(k)) for k in range(n)]
            wait_for(lambda: metric_sum(get_metrics(self, server)[1], "mcp_inflight_requests") >= n,
                     f"{n} requests in flight")
            port = server.port
            server.signal(signal.SIGTERM)
            # While draining, a new request is refused or answered 503, never
            # served and never left hanging. The probe goes out once the server
            # has logged that it is draining (it logs before it stops
            # accepting, a window of microseconds against our milliseconds).
            try:
                wait_for(lambda: "SIGTERM" in server.stderr_text(), "the server to log the SIGTERM", timeout=30)
                draining_logged = True
            except AssertionError:
                draining_logged = False
            if draining_logged:
                try:
                    with requests.Session() as s:
                        r = http(server, "GET", "/v2/models/slow", timeout=60, session=s)
                    self.assertEqual(r.status_code, 503, f"new request during the drain got {r.status_code}")
                except requests.exceptions.Timeout:
                    self.fail("a new request during the drain hung")
                except requests.ConnectionError:
                    pass
            responses = [f.result(timeout=HTTP_TIMEOUT_S) for f in futures]
        for k, r in enumerate(responses):
            head, out = parse_v2_response(self, r)
            self.assertEqual(head["id"], f"drain-{k}")
            assert_identical(self, out["y"], want[k:k + 1], f"in-flight request {k}")
        rc = server.wait()
        self.assertIsNotNone(rc, "server did not exit after SIGTERM")
        self.assertEqual(rc, 0, "exit status after SIGTERM\n" + server.stderr_text())
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=10).close()

    def test_sigterm_drains_every_codec_at_every_stage(self):
        """Requests of every codec in flight when SIGTERM arrives get their
        real answers, whether their body is still arriving, they wait in the
        queue or they run."""
        import http.client
        x = slow_input(60, LONG)
        want = mcpctl_run(model_file("slow"), x=x)["y"].astype(np.float32)
        flat = [float(v) for v in x.reshape(-1)]
        v2_json, _ = v2_request([("x", "FP32", x, False)], req_id="json")
        v2_bin, bin_headers = v2_request([("x", "FP32", x, True)], req_id="binary")
        requests_by_codec = {
            "v2-json": ("/v2/models/slow/infer", v2_json, {"Content-Type": "application/json"}),
            "v2-binary": ("/v2/models/slow/infer", v2_bin, bin_headers),
            "v1": ("/v1/models/slow:predict", json.dumps({"instances": [x[0].tolist()]}).encode(),
                   {"Content-Type": "application/json"}),
            "simple": ("/v1/infer", json.dumps({"input": flat, "shape": list(x.shape)}).encode(),
                       {"Content-Type": "application/json"}),
        }

        def outputs_of(codec, body):
            doc = json.loads(body)
            if codec == "v1":
                return np.array(doc["predictions"], dtype=np.float32).reshape(want.shape)
            if codec == "simple":
                return np.array(doc["output"], dtype=np.float32).reshape(want.shape)
            return np.array(doc["outputs"][0]["data"], dtype=np.float32).reshape(want.shape)

        for stage in ("uploading", "queued or running"):
            server = self.start()
            socks = {}
            for codec, (path, body, headers) in requests_by_codec.items():
                head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
                head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=HTTP_TIMEOUT_S)
                sock.sendall(head.encode() + (body[:-1] if stage == "uploading" else body))
                socks[codec] = sock
            try:
                # Every request is known to the server (its headers arrived;
                # the /metrics request that asks is one more).
                wait_for(lambda: metric_sum(get_metrics(self, server)[1], "mcp_http_requests_open") >= 5,
                         "the requests to be admitted")
                if stage != "uploading":
                    wait_for(lambda: metric_sum(get_metrics(self, server)[1], "mcp_inflight_requests") >= 4,
                             "the requests to be queued")
                server.signal(signal.SIGTERM)
                if stage == "uploading":
                    wait_for(lambda: "SIGTERM" in server.stderr_text(), "the server to log the SIGTERM", timeout=30)
                    for codec, (path, body, headers) in requests_by_codec.items():
                        socks[codec].sendall(body[-1:])
                for codec, sock in socks.items():
                    resp = http.client.HTTPResponse(sock)
                    resp.begin()
                    body = resp.read()
                    self.assertEqual(resp.status, 200, f"{stage}, {codec}: {body[:300]!r}")
                    assert_identical(self, outputs_of(codec, body), want, f"{stage}, {codec}")
            finally:
                for sock in socks.values():
                    sock.close()
            rc = server.wait()
            self.assertEqual(rc, 0, f"{stage}: exit status after SIGTERM\n" + server.stderr_text())

    def test_sigint_idle_exits_0(self):
        server = self.start()
        port = server.port
        server.signal(signal.SIGINT)
        rc = server.wait()
        self.assertEqual(rc, 0, "exit status after SIGINT\n" + server.stderr_text())
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=10).close()


# ---------------------------------------------------------------------------
# batching is real
# ---------------------------------------------------------------------------

class BatchingTests(ServerTestCase):
    CLIENTS = 16
    REQUESTS = 50
    MAX_BATCH = 32

    @classmethod
    def server_args(cls):
        return ["--model-path", DIGITS, "--max-batch-size", cls.MAX_BATCH, "--max-queue-delay-us", 2000]

    def test_concurrent_clients_get_their_own_results(self):
        rows_per_request = [1 + (c % 3) for c in range(self.CLIENTS)]
        n_rows = sum(rows_per_request) * self.REQUESTS
        rng = np.random.default_rng(2026)
        xs = rng.integers(0, 17, size=(n_rows, 64)).astype(np.float32)
        self.assertEqual(len({row.tobytes() for row in xs}), n_rows, "inputs must be distinct")
        want = mcpctl_run(DIGITS, input=xs)
        starts = np.cumsum([0] + [b * self.REQUESTS for b in rows_per_request])
        protocols = ["v2-json", "v2-binary", "v1", "simple"]

        def client(c):
            def run():
                b, proto = rows_per_request[c], protocols[c % 4]
                with requests.Session() as s:
                    for j in range(self.REQUESTS):
                        lo = starts[c] + j * b
                        x = xs[lo:lo + b]
                        what = f"client {c} ({proto}) request {j}"
                        if proto.startswith("v2"):
                            body, headers = v2_request([("input", "FP32", x, proto == "v2-binary")],
                                                       req_id=f"c{c}-r{j}",
                                                       parameters={"binary_data_output": proto == "v2-binary"})
                            r = http(self.server, "POST", "/v2/models/digits/infer", body=body, headers=headers,
                                     session=s)
                            head, out = parse_v2_response(self, r)
                            self.assertEqual(head["id"], f"c{c}-r{j}", what)
                            probs, labels = out["probabilities"], out["label"]
                        elif proto == "v1":
                            r = http(self.server, "POST", "/v1/models/digits:predict", session=s,
                                     json_body={"instances": [[float(v) for v in row] for row in x]})
                            self.assertEqual(r.status_code, 200, f"{what}: {r.text[:300]}")
                            preds = r.json()["predictions"]
                            probs = np.asarray([p["probabilities"] for p in preds], dtype=np.float32)
                            labels = np.asarray([p["label"] for p in preds], dtype=np.int64)
                        else:  # simple, model omitted: the only model loaded
                            r = http(self.server, "POST", "/v1/infer", session=s,
                                     json_body={"input": [float(v) for v in x.reshape(-1)], "shape": [b, 64]})
                            self.assertEqual(r.status_code, 200, f"{what}: {r.text[:300]}")
                            probs = np.asarray(r.json()["output"], dtype=np.float32).reshape(r.json()["shape"])
                            labels = None
                        assert_identical(self, probs, want["probabilities"][lo:lo + b], what + " probabilities")
                        if labels is not None:
                            assert_identical(self, labels, want["label"][lo:lo + b], what + " label")
                return self.REQUESTS
            return run

        stats_before = self.call("GET", "/v2/models/digits/stats").json()["model_stats"][0]
        done = run_concurrently([client(c) for c in range(self.CLIENTS)], timeout=1800)
        self.assertEqual(sum(done), self.CLIENTS * self.REQUESTS)

        families, samples_ = get_metrics(self, self.server)
        self.assertEqual(families.get("mcp_batch_size"), "histogram")
        count = metric_sum(samples_, "mcp_batch_size_count", model="digits")
        le1 = metric_sum(samples_, "mcp_batch_size_bucket", model="digits", le="1") + \
            metric_sum(samples_, "mcp_batch_size_bucket", model="digits", le="1.0")
        self.assertGreaterEqual(count, 1)
        self.assertLess(le1, count, f"every one of {count:.0f} batches had size 1: no batching happened")
        for le in ("32", "32.0"):
            if any(n == "mcp_batch_size_bucket" and l.get("le") == le for n, l, _ in samples_):
                self.assertEqual(metric_sum(samples_, "mcp_batch_size_bucket", model="digits", le=le), count,
                                 "a batch larger than --max-batch-size 32")
        stats_after = self.call("GET", "/v2/models/digits/stats").json()["model_stats"][0]
        executions = stats_after["execution_count"] - stats_before["execution_count"]
        self.assertLess(executions, self.CLIENTS * self.REQUESTS, "statistics: one execution per request")


# ---------------------------------------------------------------------------
# /metrics
# ---------------------------------------------------------------------------

class MetricsTests(ServerTestCase):
    FAMILIES = {
        "mcp_requests_total": "counter",
        "mcp_inference_errors_total": "counter",
        "mcp_queue_duration_seconds": "histogram",
        "mcp_compute_duration_seconds": "histogram",
        "mcp_request_duration_seconds": "histogram",
        "mcp_batch_size": "histogram",
        "mcp_queue_depth": "gauge",
        "mcp_inflight_requests": "gauge",
        "mcp_http_requests_open": "gauge",
        "mcp_http_connections": "gauge",
        "mcp_request_body_bytes_held": "gauge",
        "mcp_models_loaded": "gauge",
        "mcp_model_memory_bytes": "gauge",
    }

    def traffic(self):
        x = samples()[0]
        for _ in range(3):
            parse_v2_response(self, self.infer("digits", [("input", "FP32", x, False)]))
        r = self.call("POST", "/v1/models/digits:predict", json_body={"instances": [[float(v) for v in x[0]]]})
        self.assertEqual(r.status_code, 200, r.text)
        r = self.call("POST", "/v1/infer", json_body={"input": [float(v) for v in x[0]], "shape": [1, 64]})
        self.assertEqual(r.status_code, 200, r.text)
        error_message(self, self.infer("digits", [("input", "FP32", np.zeros((1, 5), np.float32), False)]), 400)

    def test_families_and_labels(self):
        r0 = self.call("GET", "/metrics")
        self.assertEqual(r0.status_code, 200)
        ctype = r0.headers.get("Content-Type", "")
        self.assertTrue(ctype.startswith("text/plain") and "version=0.0.4" in ctype, ctype)
        _, before = parse_metrics(r0.text)
        self.traffic()
        families, after = get_metrics(self, self.server)
        for name, kind in self.FAMILIES.items():
            self.assertEqual(families.get(name), kind, f"family {name} ({kind}) missing")
        version = self.call("GET", "/v2/models/digits").json()["versions"][0]
        req = [l for n, l, _ in after if n == "mcp_requests_total"]
        self.assertTrue(req)
        for labels in req:
            self.assertEqual(set(labels), {"model", "version", "protocol", "code"}, labels)

        def delta(name, **labels):
            return metric_sum(after, name, **labels) - metric_sum(before, name, **labels)
        self.assertEqual(delta("mcp_requests_total", model="digits", version=version, protocol="v2", code="200"), 3)
        self.assertEqual(delta("mcp_requests_total", model="digits", protocol="v1", code="200"), 1)
        self.assertEqual(delta("mcp_requests_total", model="digits", protocol="simple", code="200"), 1)
        self.assertEqual(delta("mcp_requests_total", model="digits", protocol="v2", code="400"), 1)
        errs = [l for n, l, _ in after if n == "mcp_inference_errors_total"]
        self.assertTrue(errs, "no mcp_inference_errors_total series after a failed request")
        for labels in errs:
            self.assertEqual(set(labels), {"model", "reason"}, labels)
        self.assertEqual(delta("mcp_inference_errors_total", model="digits"), 1)
        self.assertGreaterEqual(delta("mcp_request_duration_seconds_count", model="digits"), 5)
        self.assertGreaterEqual(delta("mcp_compute_duration_seconds_count", model="digits"), 1)
        self.assertGreaterEqual(delta("mcp_queue_duration_seconds_count", model="digits"), 1)
        self.assertGreaterEqual(delta("mcp_batch_size_count", model="digits"), 1)
        self.assertEqual(metric_sum(after, "mcp_models_loaded"), 1)
        self.assertGreater(metric_sum(after, "mcp_model_memory_bytes"), 0)
        # Gauges settle once the last response is fully sent (bounded wait).
        wait_for(lambda: metric_sum(get_metrics(self, self.server)[1], "mcp_inflight_requests") == 0,
                 "mcp_inflight_requests to return to 0 after all requests were answered")
        self.assertEqual(metric_sum(get_metrics(self, self.server)[1], "mcp_queue_depth"), 0)

    def test_histograms_consistent(self):
        self.traffic()
        families, samples_ = get_metrics(self, self.server)
        for fam, kind in families.items():
            if kind != "histogram":
                continue
            series = {}
            for n, l, v in samples_:
                if n == fam + "_bucket":
                    key = tuple(sorted((k, x) for k, x in l.items() if k != "le"))
                    series.setdefault(key, []).append((float("inf") if l["le"] == "+Inf" else float(l["le"]), v))
            for key, buckets in series.items():
                buckets.sort()
                counts = [v for _, v in buckets]
                self.assertEqual(counts, sorted(counts), f"{fam}{dict(key)}: buckets not cumulative")
                self.assertEqual(buckets[-1][0], float("inf"), f"{fam}{dict(key)}: no +Inf bucket")
                self.assertEqual(buckets[-1][1], metric_sum(samples_, fam + "_count", **dict(key)),
                                 f"{fam}{dict(key)}: +Inf bucket differs from _count")

    @unittest.skipUnless(shutil.which("promtool"), "promtool not installed (Debian package prometheus)")
    def test_promtool_check_metrics(self):
        self.traffic()
        r = self.call("GET", "/metrics")
        p = subprocess.run([shutil.which("promtool"), "check", "metrics"], input=r.content, capture_output=True,
                           timeout=120)
        report = (p.stdout + p.stderr).decode(errors="replace").strip()
        self.assertEqual(p.returncode, 0, report)
        self.assertEqual(report, "", "promtool check metrics must report nothing")


if __name__ == "__main__":
    unittest.main()


# ---------------------------------------------------------------------------
# declarative pre/postprocessing steps and Triton model folders, as loaded
# from a model repository
# ---------------------------------------------------------------------------

class StepsTests(RepositoryServerTestCase):
    LABELS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]

    @classmethod
    def fill_repository(cls, repo_dir):
        with open(os.path.join(repo_dir, "labels.txt"), "w") as f:
            f.write("\n".join(cls.LABELS) + "\n")
        # Clients send raw uint8 pixels; the server casts them; the top 3
        # classes come back as "score:index:label" strings.
        with open(os.path.join(repo_dir, "digits_top3.yaml"), "w") as f:
            f.write(f"name: digits_top3\npath: {DIGITS}\nmax_batch_size: 8\n"
                    "inputs:\n  - name: input\n    dtype: UINT8\n    shape: [-1, 64]\n"
                    "preprocess:\n  - cast: {dtype: FP32}\n"
                    "postprocess:\n  - topk: {k: 3, labels: labels.txt, tensor: probabilities}\n")
        # A Triton folder whose policy serves two of its three versions.
        vdir = os.path.join(repo_dir, "digits_versions")
        for ver in ("1", "2", "3"):
            os.makedirs(os.path.join(vdir, ver))
            shutil.copy(DIGITS, os.path.join(vdir, ver, "model.onnx"))
        with open(os.path.join(vdir, "config.pbtxt"), "w") as f:
            f.write('name: "digits_versions"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
                    'version_policy { latest { num_versions: 2 } }\n')
        # The same model as a Triton model folder, loaded as it is.
        tdir = os.path.join(repo_dir, "digits_triton")
        os.makedirs(os.path.join(tdir, "1"))
        shutil.copy(DIGITS, os.path.join(tdir, "1", "model.onnx"))
        with open(os.path.join(tdir, "config.pbtxt"), "w") as f:
            f.write('name: "digits_triton"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
                    'input [ { name: "input" data_type: TYPE_FP32 dims: [ 64 ] } ]\n'
                    'output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 10 ] },\n'
                    '         { name: "label" data_type: TYPE_INT64 dims: [ ] } ]\n'
                    'instance_group [ { kind: KIND_CPU count: 2 } ]\n'
                    'dynamic_batching { max_queue_delay_microseconds: 200 }\n')
        # A YAML descriptor may name a Triton folder too.
        with open(os.path.join(repo_dir, "digits_via_yaml.yaml"), "w") as f:
            f.write("name: digits_via_yaml\nformat: triton\npath: digits_triton\nmax_batch_size: 8\n")

    def test_metadata_shows_what_clients_send_and_get(self):
        r = self.call("GET", "/v2/models/digits_top3")
        self.assertEqual(r.status_code, 200, r.text)
        meta = r.json()
        self.assertEqual(meta["inputs"], [{"name": "input", "datatype": "UINT8", "shape": [-1, 64]}])
        probs = [o for o in meta["outputs"] if o["name"] == "probabilities"][0]
        self.assertEqual(probs, {"name": "probabilities", "datatype": "BYTES", "shape": [-1, 3]})

    def test_cast_and_topk_with_labels(self):
        truths = {}
        with open(os.path.join(DEMO_DIR, "samples.txt")) as f:
            for line in f:
                if not line.startswith("#"):
                    name, truth, _ = line.split()
                    truths[name] = int(truth)
        for k, x in enumerate(samples()):
            name, truth = f"sample_{k}.npy", truths[f"sample_{k}.npy"]
            want = mcpctl_run(DIGITS, input=x)["probabilities"][0]
            order = sorted(range(10), key=lambda c: (-want[c], c))[:3]
            r = self.infer("digits_top3", [("input", "UINT8", x.astype(np.uint8), False)])
            self.assertEqual(r.status_code, 200, r.text)
            out = {o["name"]: o for o in r.json()["outputs"]}
            top = out["probabilities"]
            self.assertEqual(top["shape"], [1, 3])
            got = [s.split(":") for s in top["data"]]
            self.assertEqual([int(g[1]) for g in got], order, f"{name}: {top['data']}")
            self.assertEqual([g[2] for g in got], [self.LABELS[c] for c in order])
            self.assertAlmostEqual(float(got[0][0]), float(want[order[0]]), places=5)
            self.assertEqual(out["label"]["data"], [truth])

    def test_float_input_refused_after_cast_declared(self):
        x = samples()[0]
        r = self.infer("digits_top3", [("input", "FP32", x, False)])
        self.assertEqual(r.status_code, 400, r.text)
        assert_names(self, error_message(self, r, 400), "input")

    def test_load_with_tritons_json_config(self):
        """RepositoryModelLoad / POST .../load take Triton's parameters.config
        (a ModelConfig in JSON, for the model's folder) as well as our YAML
        descriptor, told apart by content."""
        cfg = {"name": "digits_triton", "platform": "onnxruntime_onnx", "max_batch_size": 4,
               "input": [{"name": "input", "data_type": "TYPE_FP32", "dims": [64]}],
               "output": [{"name": "probabilities", "data_type": "TYPE_FP32", "dims": ["10"]},
                          {"name": "label", "data_type": "TYPE_INT64", "dims": []}],
               "instance_group": [{"kind": "KIND_CPU", "count": 1}],
               "dynamic_batching": {"max_queue_delay_microseconds": 100}}
        r = self.call("POST", "/v2/repository/models/digits_triton/load",
                      json_body={"parameters": {"config": json.dumps(cfg)}})
        self.assertEqual(r.status_code, 200, r.text)
        got = self.call("GET", "/v2/models/digits_triton/config").json()
        self.assertEqual(got["max_batch_size"], 4)
        self.assertEqual(got["dynamic_batching"]["max_queue_delay_microseconds"], 100)
        x = samples()[0]
        _, out = parse_v2_response(self, self.infer("digits_triton", [("input", "FP32", x, True)]))
        assert_identical(self, out["probabilities"], mcpctl_run(DIGITS, input=x)["probabilities"], "probabilities")
        # Unloaded, it loads again by name with the same configuration.
        self.assertEqual(self.call("POST", "/v2/repository/models/digits_triton/unload").status_code, 200)
        self.assertEqual(self.call("POST", "/v2/repository/models/digits_triton/load").status_code, 200)
        self.assertEqual(self.call("GET", "/v2/models/digits_triton/config").json()["max_batch_size"], 4)
        # A JSON config for a model with no folder in the roots: 404, saying so.
        bad = dict(cfg, name="no_folder")
        msg = error_message(self, self.call("POST", "/v2/repository/models/no_folder/load",
                                            json_body={"parameters": {"config": json.dumps(bad)}}), 404)
        self.assertIn("no model folder", msg)
        # Our descriptor written as JSON is still ours (it names a path).
        ours = json.dumps({"name": "digits_json_yaml", "path": DIGITS})
        r = self.call("POST", "/v2/repository/models/digits_json_yaml/load", json_body={"parameters": {"config": ours}})
        self.assertEqual(r.status_code, 200, r.text)
        # Back to the folder's own configuration for the other tests.
        cfg.update(max_batch_size=8, instance_group=[{"kind": "KIND_CPU", "count": 2}],
                   dynamic_batching={"max_queue_delay_microseconds": 200})
        r = self.call("POST", "/v2/repository/models/digits_triton/load",
                      json_body={"parameters": {"config": json.dumps(cfg)}})
        self.assertEqual(r.status_code, 200, r.text)

    def test_triton_version_folders_keep_their_numbers(self):
        """m/1/model.onnx is version "1": addressable as /versions/1 over HTTP
        and as model_version "1" (the metadata lists it so)."""
        meta = self.call("GET", "/v2/models/digits_triton").json()
        self.assertEqual(meta["versions"], ["1"])
        x = samples()[0]
        r = self.infer("digits_triton", [("input", "FP32", x, True)], version="1")
        head, _ = parse_v2_response(self, r)
        self.assertEqual(head["model_version"], "1")
        self.assertEqual(self.call("GET", "/v2/models/digits_triton/versions/1/ready").status_code, 200)
        self.assertEqual(self.call("GET", "/v2/models/digits_triton/versions/2/ready").status_code, 404)

    def test_version_policy_decides_which_folders_serve(self):
        meta = self.call("GET", "/v2/models/digits_versions").json()
        self.assertEqual(meta["versions"], ["3", "2"])
        x = samples()[0]
        want = mcpctl_run(DIGITS, input=x)
        for ver in ("3", "2"):
            r = self.infer("digits_versions", [("input", "FP32", x, True)], version=ver)
            head, out = parse_v2_response(self, r)
            self.assertEqual(head["model_version"], ver)
            assert_identical(self, out["probabilities"], want["probabilities"], f"version {ver}")
        self.assertEqual(self.call("GET", "/v2/models/digits_versions/versions/1/ready").status_code, 404)
        head, _ = parse_v2_response(self, self.infer("digits_versions", [("input", "FP32", x, True)]))
        self.assertEqual(head["model_version"], "3", "the current version is the highest")
        # Unload takes every version; a load by name brings them back.
        self.assertEqual(self.call("POST", "/v2/repository/models/digits_versions/unload").status_code, 200)
        for ver in ("2", "3"):
            self.assertEqual(self.call("GET", f"/v2/models/digits_versions/versions/{ver}/ready").status_code, 404)
        self.assertEqual(self.call("POST", "/v2/repository/models/digits_versions/load").status_code, 200)
        self.assertEqual(self.call("GET", "/v2/models/digits_versions/versions/2/ready").status_code, 200)

    def test_triton_folder_serves_like_the_onnx_file(self):
        r = self.call("GET", "/v2/models/digits_triton/config")
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(r.json()["max_batch_size"], 8)
        x = samples()[1]
        r = self.infer("digits_triton", [("input", "FP32", x, True)])
        _, got = parse_v2_response(self, r)
        want = mcpctl_run(DIGITS, input=x)
        assert_identical(self, got["probabilities"], want["probabilities"], "probabilities")
        r = self.infer("digits_via_yaml", [("input", "FP32", x, True)])
        _, got = parse_v2_response(self, r)
        assert_identical(self, got["probabilities"], want["probabilities"], "probabilities (format: triton)")
