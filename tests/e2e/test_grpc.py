#!/usr/bin/python3
"""mcp2026-server over gRPC, end to end, with Debian's python3-grpcio.

The message classes come from our proto/ files through Debian's protoc
(protobuf-compiler) and the service stubs through python3-grpc-tools, both
generated into a temporary folder at test time. Every RPC of
inference.GRPCInferenceService and grpc.health.v1.Health is called; inference
answers are compared bit for bit with the HTTP path and with `mcpctl run`.

Run one class by hand:
  MCP_SERVER_BIN=build/bin/mcp2026-server MCPCTL_BIN=build/bin/mcpctl \\
    /usr/bin/python3 -m unittest -v test_grpc.GrpcTests
"""
import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import threading
import unittest

import numpy as np

import test_server as ts

PROTO_DIR = os.path.join(ts.SOURCE_DIR, "proto")
GEN_DIR = None
pb = hp = pb_grpc = hp_grpc = grpc = cp = cp_grpc = None


def setUpModule():
    global GEN_DIR, pb, hp, pb_grpc, hp_grpc, grpc, cp, cp_grpc
    ts.setUpModule()
    GEN_DIR = tempfile.mkdtemp(prefix="mcp-e2e-grpc-")
    protos = ["grpc_service.proto", "health.proto", "control.proto"]
    for cmd in (["protoc", f"-I{PROTO_DIR}", f"--python_out={GEN_DIR}", *protos],
                [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}", f"--grpc_python_out={GEN_DIR}", *protos]):
        p = subprocess.run(cmd, capture_output=True, timeout=120)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.decode(errors='replace')}")
    sys.path.insert(0, GEN_DIR)
    import grpc as grpc_mod
    grpc = grpc_mod
    pb = importlib.import_module("grpc_service_pb2")
    hp = importlib.import_module("health_pb2")
    pb_grpc = importlib.import_module("grpc_service_pb2_grpc")
    hp_grpc = importlib.import_module("health_pb2_grpc")
    cp = importlib.import_module("control_pb2")
    cp_grpc = importlib.import_module("control_pb2_grpc")


def tearDownModule():
    ts.tearDownModule()
    if GEN_DIR:
        shutil.rmtree(GEN_DIR, ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# datatype -> (numpy dtype, typed contents field or None when raw only)
TYPES = {
    "FP32": (np.float32, "fp32_contents"), "FP64": (np.float64, "fp64_contents"),
    "INT8": (np.int8, "int_contents"), "INT16": (np.int16, "int_contents"), "INT32": (np.int32, "int_contents"),
    "INT64": (np.int64, "int64_contents"), "UINT8": (np.uint8, "uint_contents"),
    "UINT16": (np.uint16, "uint_contents"), "UINT32": (np.uint32, "uint_contents"),
    "UINT64": (np.uint64, "uint64_contents"), "BOOL": (np.bool_, "bool_contents"),
    "FP16": (np.float16, None), "BF16": (np.uint16, None), "BYTES": (object, "bytes_contents"),
}
MODEL_OF = {"FP32": "identity_fp32", "FP64": "identity_fp64", "INT8": "identity_int8", "INT16": "identity_int16",
            "INT32": "identity_int32", "INT64": "identity_int64", "UINT8": "identity_uint8",
            "UINT16": "identity_uint16", "UINT32": "identity_uint32", "UINT64": "identity_uint64",
            "BOOL": "identity_bool", "FP16": "identity_fp16", "BF16": "identity_bf16", "BYTES": "identity_bytes"}


def sample(datatype, rows=2):
    rng = np.random.default_rng(len(datatype) * 7 + rows)
    if datatype == "BYTES":
        return np.array([[b"a", b"\xff\x01bin", b""], [b"text", b"x" * 40, b"\x7f"]][:rows] * (rows // 2 + 1),
                        dtype=object)[:rows]
    if datatype == "BOOL":
        return rng.integers(0, 2, (rows, 3)).astype(np.bool_)
    if datatype in ("FP32", "FP64", "FP16"):
        return rng.standard_normal((rows, 3)).astype(TYPES[datatype][0])
    if datatype == "BF16":
        return (rng.integers(0, 2 ** 16, (rows, 3))).astype(np.uint16)  # raw bit patterns
    info = np.iinfo(TYPES[datatype][0])
    return rng.integers(info.min, info.max, (rows, 3), dtype=TYPES[datatype][0], endpoint=True)


def raw_bytes(arr, datatype):
    if datatype == "BYTES":
        return b"".join(len(e).to_bytes(4, "little") + e for e in arr.reshape(-1))
    return np.ascontiguousarray(arr).tobytes()


def from_raw(raw, datatype, shape):
    if datatype == "BYTES":
        out, i = [], 0
        while i < len(raw):
            n = int.from_bytes(raw[i:i + 4], "little")
            out.append(raw[i + 4:i + 4 + n])
            i += 4 + n
        return np.array(out, dtype=object).reshape(shape)
    return np.frombuffer(raw, dtype=TYPES[datatype][0]).reshape(shape)


def infer_request(model, name, datatype, arr, raw, req_id="", outputs=(), parameters=None):
    req = pb.ModelInferRequest(model_name=model, id=req_id)
    t = req.inputs.add()
    t.name, t.datatype = name, datatype
    t.shape.extend(arr.shape)
    if raw:
        req.raw_input_contents.append(raw_bytes(arr, datatype))
    else:
        # FP16 and BF16 have no typed field: a client that sends them as
        # fp32_contents must be told to send them raw.
        field = TYPES[datatype][1] or "fp32_contents"
        values = arr.reshape(-1).astype(np.float32).tolist() if TYPES[datatype][1] is None else arr.reshape(-1).tolist()
        getattr(t.contents, field).extend(values)
    for o in outputs:
        req.outputs.add().name = o
    for k, v in (parameters or {}).items():
        req.parameters[k].int64_param = v
    return req


class GrpcServerTestCase(ts.ServerTestCase):
    MODELS = ()
    EXTRA = ()

    @classmethod
    def server_args(cls):
        cls.grpc_port = free_port()
        args = ["--model-path", ts.DIGITS, "--grpc-port", cls.grpc_port, *cls.EXTRA]
        for m in cls.MODELS:
            args += ["--model-path", ts.model_file(m)]
        return args

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.grpc_port}")
        cls.stub = pb_grpc.GRPCInferenceServiceStub(cls.channel)
        cls.health = hp_grpc.HealthStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        super().tearDownClass()

    def expect_code(self, code, fn, *args, **kw):
        with self.assertRaises(grpc.RpcError) as ctx:
            fn(*args, timeout=ts.HTTP_TIMEOUT_S, **kw)
        self.assertEqual(ctx.exception.code(), code, ctx.exception.details())
        self.assertTrue(ctx.exception.details(), "an error without a message")
        return ctx.exception.details()


class GrpcTests(GrpcServerTestCase):
    MODELS = tuple(sorted(set(MODEL_OF.values())))
    EXTRA = ("--model-root", None)  # filled in server_args

    @classmethod
    def server_args(cls):
        cls.EXTRA = ("--model-root", ts.MODELS_DIR)
        return super().server_args()

    def test_server_live_ready_metadata(self):
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest(), timeout=30).live)
        self.assertTrue(self.stub.ServerReady(pb.ServerReadyRequest(), timeout=30).ready)
        m = self.stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=30)
        self.assertEqual(m.name, "mcp2026")
        self.assertIn("model_repository", m.extensions)

    def test_model_ready_and_metadata(self):
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name="digits"), timeout=30).ready)
        self.assertFalse(self.stub.ModelReady(pb.ModelReadyRequest(name="nope"), timeout=30).ready)
        m = self.stub.ModelMetadata(pb.ModelMetadataRequest(name="digits"), timeout=30)
        http = self.call("GET", "/v2/models/digits").json()
        self.assertEqual(m.name, http["name"])
        self.assertEqual(list(m.versions), http["versions"])
        self.assertEqual(m.platform, http["platform"])
        self.assertEqual([(t.name, t.datatype, list(t.shape)) for t in m.inputs],
                         [(t["name"], t["datatype"], t["shape"]) for t in http["inputs"]])
        self.assertEqual([(t.name, t.datatype, list(t.shape)) for t in m.outputs],
                         [(t["name"], t["datatype"], t["shape"]) for t in http["outputs"]])
        msg = self.expect_code(grpc.StatusCode.NOT_FOUND, self.stub.ModelMetadata, pb.ModelMetadataRequest(name="nope"))
        self.assertIn("nope", msg)
        self.expect_code(grpc.StatusCode.NOT_FOUND, self.stub.ModelMetadata,
                         pb.ModelMetadataRequest(name="digits", version="v9.9.9"))

    def test_infer_identical_to_http_and_engine(self):
        for k, x in enumerate(ts.samples()):
            want = ts.mcpctl_run(ts.DIGITS, input=x)
            _, http_out = ts.parse_v2_response(self, self.infer("digits", [("input", "FP32", x, True)],
                                                                parameters={"binary_data_output": True}))
            for raw in (False, True):
                with self.subTest(sample=k, raw=raw):
                    r = self.stub.ModelInfer(infer_request("digits", "input", "FP32", x, raw, req_id=f"s{k}"),
                                             timeout=30)
                    self.assertEqual(r.model_name, "digits")
                    self.assertEqual(r.id, f"s{k}")
                    self.assertEqual(len(r.raw_output_contents), len(r.outputs))
                    for o, rawo in zip(r.outputs, r.raw_output_contents):
                        got = from_raw(rawo, o.datatype, list(o.shape))
                        ts.assert_identical(self, got, want[o.name], o.name)
                        self.assertEqual(rawo, http_out[o.name + ":raw"], f"{o.name}: gRPC and HTTP differ")

    def test_every_datatype_typed_and_raw(self):
        for datatype, model in MODEL_OF.items():
            x = sample(datatype)
            for raw in (False, True):
                with self.subTest(datatype=datatype, raw=raw):
                    req = infer_request(model, "ident_in", datatype, x, raw)
                    if not raw and TYPES[datatype][1] is None:
                        # FP16 and BF16 travel raw only.
                        self.expect_code(grpc.StatusCode.INVALID_ARGUMENT, self.stub.ModelInfer, req)
                        continue
                    r = self.stub.ModelInfer(req, timeout=30)
                    o = r.outputs[0]
                    self.assertEqual((o.name, o.datatype, list(o.shape)), ("ident_out", datatype, [2, 3]))
                    got = from_raw(r.raw_output_contents[0], datatype, [2, 3])
                    self.assertEqual(got.tolist(), x.tolist())

    def test_typed_contents_checked(self):
        x = sample("INT8")
        req = infer_request("identity_int8", "ident_in", "INT8", x, False)
        req.inputs[0].contents.int_contents[0] = 300  # beyond INT8
        self.assertIn("out of range", self.expect_code(grpc.StatusCode.INVALID_ARGUMENT, self.stub.ModelInfer, req))
        req = infer_request("identity_fp32", "ident_in", "FP32", sample("FP32"), False)
        del req.inputs[0].contents.fp32_contents[-1]
        self.assertIn("needs 6 elements", self.expect_code(grpc.StatusCode.INVALID_ARGUMENT, self.stub.ModelInfer, req))
        req = infer_request("identity_fp32", "ident_in", "FP32", sample("FP32"), True)
        req.raw_input_contents[0] = req.raw_input_contents[0][:-1]
        self.expect_code(grpc.StatusCode.INVALID_ARGUMENT, self.stub.ModelInfer, req)
        req = infer_request("identity_fp32", "wrong_name", "FP32", sample("FP32"), True)
        self.assertIn("wrong_name", self.expect_code(grpc.StatusCode.INVALID_ARGUMENT, self.stub.ModelInfer, req))
        self.expect_code(grpc.StatusCode.NOT_FOUND, self.stub.ModelInfer,
                         infer_request("nope", "ident_in", "FP32", sample("FP32"), True))
        self.expect_code(grpc.StatusCode.INVALID_ARGUMENT, self.stub.ModelInfer,
                         infer_request("", "ident_in", "FP32", sample("FP32"), True))
        # Not a ModelInferRequest at all.
        bad = self.channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        self.expect_code(grpc.StatusCode.INVALID_ARGUMENT, bad, b"\xff\xff\xff\xff")

    def test_requested_output_only(self):
        x = ts.samples()[1]
        r = self.stub.ModelInfer(infer_request("digits", "input", "FP32", x, True, outputs=["label"]), timeout=30)
        self.assertEqual([o.name for o in r.outputs], ["label"])
        self.assertEqual(len(r.raw_output_contents), 1)

    def test_stream_of_1000_matched_by_id(self):
        n = 1000
        xs = {f"req-{i}": np.full((1, 3), float(i), dtype=np.float32) for i in range(n)}

        def requests():
            for rid, x in xs.items():
                yield infer_request("identity_fp32", "ident_in", "FP32", x, True, req_id=rid)

        seen = {}
        for resp in self.stub.ModelStreamInfer(requests(), timeout=ts.HTTP_TIMEOUT_S):
            self.assertEqual(resp.error_message, "")
            r = resp.infer_response
            self.assertNotIn(r.id, seen, "a response came twice")
            seen[r.id] = from_raw(r.raw_output_contents[0], "FP32", [1, 3])
        self.assertEqual(set(seen), set(xs))
        for rid, x in xs.items():
            self.assertEqual(seen[rid].tolist(), x.tolist(), rid)

    def test_stream_errors_do_not_end_it(self):
        good = infer_request("identity_fp32", "ident_in", "FP32", sample("FP32"), True, req_id="good")
        bad = infer_request("nope", "ident_in", "FP32", sample("FP32"), True, req_id="bad")
        out = list(self.stub.ModelStreamInfer(iter([good, bad, good]), timeout=60))
        self.assertEqual(len(out), 3)
        errors = [m.error_message for m in out if m.error_message]
        self.assertEqual(len(errors), 1)
        self.assertIn("nope", errors[0])

    def test_health_per_model(self):
        S = hp.HealthCheckResponse
        self.assertEqual(self.health.Check(hp.HealthCheckRequest(service=""), timeout=30).status, S.SERVING)
        self.assertEqual(self.health.Check(hp.HealthCheckRequest(service="digits"), timeout=30).status, S.SERVING)
        self.expect_code(grpc.StatusCode.NOT_FOUND, self.health.Check, hp.HealthCheckRequest(service="nope"))

    def test_config_statistics_index(self):
        c = self.stub.ModelConfig(pb.ModelConfigRequest(name="digits"), timeout=30).config
        http = self.call("GET", "/v2/models/digits/config").json()
        self.assertEqual(c.name, "digits")
        self.assertEqual(c.max_batch_size, http["max_batch_size"])
        self.assertEqual([list(i.dims) for i in c.input], [i["dims"] for i in http["input"]])
        self.stub.ModelInfer(infer_request("digits", "input", "FP32", ts.samples()[0], True), timeout=30)
        st = self.stub.ModelStatistics(pb.ModelStatisticsRequest(name="digits"), timeout=30).model_stats[0]
        self.assertGreaterEqual(st.inference_count, 1)
        self.assertGreaterEqual(st.inference_stats.success.count, 1)
        self.assertGreater(st.inference_stats.compute_infer.ns, 0)
        all_stats = self.stub.ModelStatistics(pb.ModelStatisticsRequest(), timeout=30).model_stats
        self.assertIn("digits", [s.name for s in all_stats])
        idx = self.stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True), timeout=30).models
        self.assertIn(("digits", "READY"), [(m.name, m.state) for m in idx])

    def test_load_unload(self):
        text = f"name: grpc_loaded\npath: {ts.model_file('identity_fp32')}\n"
        req = pb.RepositoryModelLoadRequest(model_name="grpc_loaded")
        req.parameters["config"].string_param = text
        self.stub.RepositoryModelLoad(req, timeout=ts.HTTP_TIMEOUT_S)
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name="grpc_loaded"), timeout=30).ready)
        r = self.stub.ModelInfer(infer_request("grpc_loaded", "ident_in", "FP32", sample("FP32"), True), timeout=30)
        self.assertEqual(r.model_name, "grpc_loaded")
        self.stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="grpc_loaded"), timeout=30)
        self.assertFalse(self.stub.ModelReady(pb.ModelReadyRequest(name="grpc_loaded"), timeout=30).ready)
        S = hp.HealthCheckResponse
        self.assertEqual(self.health.Check(hp.HealthCheckRequest(service="grpc_loaded"), timeout=30).status,
                         S.NOT_SERVING)
        # Refusals: outside the roots, a file override, an unknown name.
        bad = pb.RepositoryModelLoadRequest(model_name="evil")
        bad.parameters["config"].string_param = "name: evil\npath: /etc/passwd\n"
        self.assertIn("outside the model roots",
                      self.expect_code(grpc.StatusCode.INVALID_ARGUMENT, self.stub.RepositoryModelLoad, bad))
        bad = pb.RepositoryModelLoadRequest(model_name="digits")
        bad.parameters["file:1/model.onnx"].bytes_param = b"x"
        self.expect_code(grpc.StatusCode.INVALID_ARGUMENT, self.stub.RepositoryModelLoad, bad)
        self.expect_code(grpc.StatusCode.NOT_FOUND, self.stub.RepositoryModelLoad,
                         pb.RepositoryModelLoadRequest(model_name="never_heard_of"))

    def test_unknown_method_unimplemented(self):
        fn = self.channel.unary_unary("/inference.GRPCInferenceService/NoSuchMethod")
        self.expect_code(grpc.StatusCode.UNIMPLEMENTED, fn, b"")
        fn = self.channel.unary_unary("/other.Service/Call")
        self.expect_code(grpc.StatusCode.UNIMPLEMENTED, fn, b"")

    def test_mcpctl_bench_over_grpc(self):
        """mcpctl bench's gRPC clients (unary ModelInfer and a ModelStreamInfer
        stream per worker) get answers, and no errors."""
        import json as js

        def successes():
            req = pb.ModelStatisticsRequest(name="identity_fp32")
            return sum(m.inference_stats.success.count for m in self.stub.ModelStatistics(req, timeout=30).model_stats)

        # 20 unary clients span two asynchronous driver threads (16 + 4).
        for proto, levels in (("grpc", "1,2,20"), ("grpc-stream", "1,2")):
            before = successes()
            p = subprocess.run([ts.MCPCTL_BIN, "bench", "identity_fp32", "--server", self.server.url, "--grpc",
                                f"127.0.0.1:{self.grpc_port}", "--protocol", proto, "--concurrency", levels,
                                "--duration", "300ms", "--json"], capture_output=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr.decode())
            doc = js.loads(p.stdout)
            self.assertEqual(doc["protocol"], proto)
            self.assertEqual([l["concurrency"] for l in doc["levels"]], [int(x) for x in levels.split(",")])
            for level in doc["levels"]:
                self.assertGreater(level["requests"], level["concurrency"] - 1, proto)
                self.assertEqual(level["errors"], 0, level.get("first_error"))
            # Every request the client counted reached the model (plus warm-ups).
            self.assertGreaterEqual(successes() - before, sum(l["requests"] for l in doc["levels"]), proto)

    def test_mcpctl_bench_grpc_failures(self):
        """Calls that all fail (no gRPC server on the port) make bench fail
        naming the error, not report figures."""
        p = subprocess.run([ts.MCPCTL_BIN, "bench", "identity_fp32", "--server", self.server.url, "--grpc",
                            f"127.0.0.1:{free_port()}", "--protocol", "grpc", "--concurrency", "3",
                            "--duration", "200ms"], capture_output=True, timeout=120)
        self.assertEqual(p.returncode, 1, p.stdout.decode())
        err = p.stderr.decode()
        self.assertIn("requests failed", err)
        self.assertIn("gRPC", err)

    def test_message_size_limit(self):
        big = np.zeros((1, 3), dtype=np.float32)
        req = infer_request("identity_fp32", "ident_in", "FP32", big, True)
        req.raw_input_contents[0] = b"\0" * (65 << 20)  # over the 64 MiB default
        self.expect_code(grpc.StatusCode.RESOURCE_EXHAUSTED, self.stub.ModelInfer, req)
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest(), timeout=30).live)


FORTUNES = os.path.join(ts.DEMO_DIR, "fortunes.gguf")


def gen_request(prompt, req_id="", model="fortunes", raw=True, **params):
    req = pb.ModelInferRequest(model_name=model, id=req_id)
    t = req.inputs.add()
    t.name, t.datatype = "text_input", "BYTES"
    t.shape.append(1)
    data = prompt.encode()
    if raw:
        req.raw_input_contents.append(len(data).to_bytes(4, "little") + data)
    else:
        t.contents.bytes_contents.append(data)
    for k, v in params.items():
        if isinstance(v, float):
            req.parameters[k].double_param = v
        elif isinstance(v, str):
            req.parameters[k].string_param = v
        else:
            req.parameters[k].int64_param = v
    return req


class GrpcGenerateTests(GrpcServerTestCase):
    """ModelStreamInfer on a generative model: one response per piece of
    text, then a final one, as Triton's decoupled models answer."""

    @classmethod
    def server_args(cls):
        return super().server_args() + ["--model-path", FORTUNES]

    def collect(self, reqs, metadata=None):
        """Each request id's text pieces and final parameters, or error."""
        out = {}
        for resp in self.stub.ModelStreamInfer(iter(reqs), timeout=120, metadata=metadata):
            if resp.error_message:
                out.setdefault("errors", []).append(resp.error_message)
                continue
            r = resp.infer_response
            if r.model_name != "fortunes":
                out[r.id] = r
                continue
            d = out.setdefault(r.id, {"pieces": [], "final": None})
            if r.parameters.get("triton_final_response") and r.parameters["triton_final_response"].bool_param:
                self.assertIsNone(d["final"], "one final response")
                d["final"] = {k: getattr(v, v.WhichOneof("parameter_choice")) for k, v in r.parameters.items()}
                self.assertEqual(len(r.outputs), 0)
            else:
                self.assertEqual([(o.name, o.datatype, list(o.shape)) for o in r.outputs], [("text_output", "BYTES", [1])])
                self.assertIsNone(d["final"], "nothing after the final response")
                d["pieces"].append(from_raw(r.raw_output_contents[0], "BYTES", [1])[0].decode())
            self.assertEqual((r.model_name, r.model_version), ("fortunes", "v1.0.0"))
        return out

    def http_text(self, prompt, n):
        r = ts.http(self.server, "POST", "/v2/models/fortunes/generate",
                    json_body={"text_input": prompt, "max_tokens": n, "temperature": 0})
        self.assertEqual(r.status_code, 200, r.text)
        return r.json()

    def test_one_response_per_token_equal_to_http(self):
        ref = self.http_text("Life is ", 32)
        out = self.collect([gen_request("Life is ", "a", max_tokens=32, temperature=0.0)])
        self.assertEqual("".join(out["a"]["pieces"]), ref["text_output"])
        self.assertGreater(len(out["a"]["pieces"]), 10)
        fin = out["a"]["final"]
        self.assertEqual((fin["finish_reason"], fin["prompt_tokens"], fin["completion_tokens"]),
                         (ref["finish_reason"], ref["prompt_tokens"], ref["completion_tokens"]))
        # bytes_contents instead of raw, a tensor model in the same stream.
        digits = infer_request("digits", "input", "FP32", np.zeros((1, 64), np.float32), True, req_id="d")
        out = self.collect([gen_request("The ", "b", raw=False, max_tokens=16), digits,
                            gen_request("Life is ", "c", max_tokens=32, temperature=0.0)])
        self.assertEqual("".join(out["b"]["pieces"]), self.http_text("The ", 16)["text_output"])
        self.assertEqual("".join(out["c"]["pieces"]), ref["text_output"])
        self.assertIn("d", out)
        self.assertNotIn("errors", out)

    def test_bad_requests_answer_in_the_stream(self):
        bad_input = gen_request("x", "e1")
        bad_input.inputs[0].name = "prompt"
        reqs = [bad_input, gen_request("x", "e2", max_tokens=0), gen_request("x", "e3", bogus=1),
                gen_request("x", "e4", cache_salt="alice"), gen_request("The ", "ok", max_tokens=4)]
        out = self.collect(reqs)
        errs = out.get("errors", [])
        self.assertEqual(len(errs), 4, errs)
        self.assertTrue(any("text_input" in e for e in errs), errs)
        self.assertTrue(any("max_tokens" in e for e in errs), errs)
        self.assertTrue(any("bogus" in e for e in errs), errs)
        self.assertTrue(any("cache_salt" in e for e in errs), errs)
        self.assertEqual(out["ok"]["final"]["completion_tokens"], 4)
        out = self.collect([gen_request("The ", "t", max_tokens=4)], metadata=(("tenant", "a b"),))
        self.assertIn("tenant", out["errors"][0])

    def test_cancel_frees_the_sequence(self):
        before = ts.http(self.server, "GET", "/v2/models/fortunes/stats").json()["model_stats"][0]["generation"]
        call = self.stub.ModelStreamInfer(iter([gen_request("The ", "long", max_tokens=4000)]), timeout=120)
        got = 0
        for _ in call:
            got += 1
            if got == 3:
                call.cancel()
                break
        for _ in range(200):
            st = ts.http(self.server, "GET", "/v2/models/fortunes/stats").json()["model_stats"][0]["generation"]
            if (st["running"], st["kv_cache"]["used_blocks"]) == (0, 0):
                break
            time.sleep(0.05)
        self.assertEqual((st["running"], st["waiting"], st["kv_cache"]["used_blocks"]), (0, 0, 0), st)
        self.assertEqual(st["requests"], before["requests"] + 1)


class GrpcSlowTests(GrpcServerTestCase):
    """Deadlines and cancels on the slow model."""

    @classmethod
    def server_args(cls):
        cls.grpc_port = free_port()
        return ["--model-path", ts.model_file("slow"), "--workers", 1, "--max-batch-size", 1,
                "--grpc-port", cls.grpc_port]

    def stats(self):
        return self.stub.ModelStatistics(pb.ModelStatisticsRequest(name="slow"), timeout=30).model_stats[0]

    def inflight(self):
        return ts.metric_sum(ts.get_metrics(self, self.server)[1], "mcp_inflight_requests")

    def test_deadline_exceeded(self):
        before = self.stats().inference_count
        blocker = self.stub.ModelInfer.future(infer_request("slow", "x", "FP32", ts.slow_input(80, ts.LONG * 2), True),
                                              timeout=ts.HTTP_TIMEOUT_S)
        ts.wait_for(lambda: self.inflight() >= 1, "the blocking request to run")
        self.expect_code(grpc.StatusCode.DEADLINE_EXCEEDED, lambda req, timeout: self.stub.ModelInfer(req, timeout=0.05),
                         infer_request("slow", "x", "FP32", ts.slow_input(81), True))
        blocker.result()
        ts.wait_for(lambda: self.inflight() == 0, "the expired request to be dropped")
        self.assertEqual(self.stats().inference_count - before, 1, "the expired request ran anyway")

    def test_cancel_mid_request(self):
        before = self.stats().inference_count
        blocker = self.stub.ModelInfer.future(infer_request("slow", "x", "FP32", ts.slow_input(82, ts.LONG * 2), True),
                                              timeout=ts.HTTP_TIMEOUT_S)
        ts.wait_for(lambda: self.inflight() >= 1, "the blocking request to run")
        waiting = self.stub.ModelInfer.future(infer_request("slow", "x", "FP32", ts.slow_input(83), True),
                                              timeout=ts.HTTP_TIMEOUT_S)
        ts.wait_for(lambda: blocker.done() or self.inflight() >= 2, "the second request to queue")
        self.assertTrue(waiting.cancel())
        self.assertEqual(blocker.result().outputs[0].name, "y")
        ts.wait_for(lambda: self.inflight() == 0, "the cancelled request to be dropped")
        self.assertEqual(self.stats().inference_count - before, 1, "the cancelled request ran anyway")

    def test_sigterm_answers_in_flight_grpc(self):
        # Last in this class (t > d, c): the server stops here.
        futures = [self.stub.ModelInfer.future(infer_request("slow", "x", "FP32", ts.slow_input(90 + i, ts.LONG), True,
                                                             req_id=f"t{i}"), timeout=ts.HTTP_TIMEOUT_S)
                   for i in range(3)]
        ts.wait_for(lambda: self.inflight() >= 3, "the requests to be in flight")
        self.server.signal(ts.signal.SIGTERM)
        for i, f in enumerate(futures):
            self.assertEqual(f.result().id, f"t{i}")
        self.assertEqual(self.server.wait(), 0)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        if cls.server.proc.poll() is None:
            rc = cls.server.stop()
            if rc != 0:
                raise AssertionError(f"server exited with status {rc}")


class GrpcBodyCapTests(GrpcServerTestCase):
    """gRPC messages count against the same server-wide cap on request
    bytes held as HTTP bodies (--max-inflight-body-bytes)."""
    MODELS = ("identity_fp32",)
    EXTRA = ("--max-inflight-body-bytes", 4096)

    def test_messages_over_the_cap_refused(self):
        small = infer_request("identity_fp32", "ident_in", "FP32", sample("FP32"), True)
        big = infer_request("identity_fp32", "ident_in", "FP32", sample("FP32"), True)
        big.raw_input_contents[0] = b"\0" * 8192
        msg = self.expect_code(grpc.StatusCode.RESOURCE_EXHAUSTED, self.stub.ModelInfer, big)
        self.assertIn("request bytes", msg)
        self.assertEqual(self.stub.ModelInfer(small, timeout=30).outputs[0].name, "ident_out")
        # In a stream: that request fails, the stream goes on.
        out = list(self.stub.ModelStreamInfer(iter([big, small]), timeout=60))
        self.assertEqual(len(out), 2)
        self.assertEqual(sum(1 for m in out if "request bytes" in m.error_message), 1)
        # HTTP shares the cap and is not left short by what gRPC held.
        r = self.infer("identity_fp32", [("ident_in", "FP32", sample("FP32"), False)])
        self.assertEqual(r.status_code, 200, r.text)


class UnixSocketTests(unittest.TestCase):
    """HTTP and gRPC on Unix domain sockets: the same happy path, mode 0660,
    a stale socket replaced at start, removed at exit, and anything else at
    the path left alone."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="mcp-e2e-uds-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.http_sock = os.path.join(self.dir, "http.sock")
        self.grpc_sock = os.path.join(self.dir, "grpc.sock")

    def start(self):
        server = ts.Server("--model-path", ts.DIGITS, "--http-socket", self.http_sock, "--grpc-socket", self.grpc_sock)
        server.start()
        self.addCleanup(server.kill)
        return server

    def http_unix(self, method, path, body=None, headers=None):
        import http.client

        class UnixConnection(http.client.HTTPConnection):
            def connect(conn):
                conn.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                conn.sock.settimeout(60)
                conn.sock.connect(self.http_sock)

        c = UnixConnection("localhost")
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def test_happy_path_on_both_sockets(self):
        # A stale socket file from an earlier run is replaced.
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(self.http_sock)
        stale.close()
        server = self.start()
        for p in (self.http_sock, self.grpc_sock):
            self.assertEqual(os.stat(p).st_mode & 0o777, 0o660, p)
        x = ts.samples()[0]
        want = ts.mcpctl_run(ts.DIGITS, input=x)
        status, data = self.http_unix("GET", "/v2/health/ready")
        self.assertEqual((status, data), (200, b'{"ready":true}'))
        body, headers = ts.v2_request([("input", "FP32", x, False)])
        status, data = self.http_unix("POST", "/v2/models/digits/infer", body, headers)
        self.assertEqual(status, 200, data[:300])
        out = json_outputs(data)
        ts.assert_identical(self, out["probabilities"], want["probabilities"], "probabilities over the HTTP socket")
        with grpc.insecure_channel(f"unix:{self.grpc_sock}") as ch:
            stub = pb_grpc.GRPCInferenceServiceStub(ch)
            self.assertTrue(stub.ServerLive(pb.ServerLiveRequest(), timeout=30).live)
            r = stub.ModelInfer(infer_request("digits", "input", "FP32", x, True), timeout=30)
            got = from_raw(r.raw_output_contents[0], "FP32", list(r.outputs[0].shape))
            ts.assert_identical(self, got, want["probabilities"], "probabilities over the gRPC socket")
            h = hp_grpc.HealthStub(ch).Check(hp.HealthCheckRequest(service="digits"), timeout=30)
            self.assertEqual(h.status, hp.HealthCheckResponse.SERVING)
        self.assertEqual(server.stop(), 0)
        self.assertFalse(os.path.exists(self.http_sock), "the HTTP socket was left behind")
        self.assertFalse(os.path.exists(self.grpc_sock), "the gRPC socket was left behind")

    def test_socket_path_too_long_refused(self):
        longp = os.path.join(self.dir, "x" * 120 + ".sock")
        for flag in ("--http-socket", "--grpc-socket"):
            p = subprocess.run([ts.SERVER_BIN, "--model-path", ts.DIGITS, "--port", "0", "--grpc-port", "0", flag, longp],
                               capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
            self.assertNotEqual(p.returncode, 0, flag)
            self.assertIn("longer than", p.stderr.decode(), flag)

    def test_other_files_at_the_path_are_not_replaced(self):
        with open(self.http_sock, "w") as f:
            f.write("precious")
        p = subprocess.run([ts.SERVER_BIN, "--model-path", ts.DIGITS, "--port", "0", "--grpc-port", "0",
                            "--http-socket", self.http_sock], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("not a socket", p.stderr.decode())
        with open(self.http_sock) as f:
            self.assertEqual(f.read(), "precious")


def json_outputs(data):
    import json
    doc = json.loads(data)
    return {o["name"]: np.array(o["data"], dtype=np.float32 if o["datatype"] == "FP32" else np.int64).reshape(o["shape"])
            for o in doc["outputs"]}


class AddressTests(unittest.TestCase):
    """--host takes IPv6 addresses and host names, for HTTP and gRPC alike."""

    def run_on(self, host, url_host):
        port, gport = free_port(), free_port()
        proc = subprocess.Popen([ts.SERVER_BIN, "--model-path", ts.DIGITS, "--host", host, "--port", str(port),
                                 "--grpc-port", str(gport)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        try:
            r = ts.wait_for(lambda: self.try_get(f"http://{url_host}:{port}/v2/health/ready"), f"the server on {host}")
            self.assertEqual(r.status_code, 200)
            with grpc.insecure_channel(f"{url_host}:{gport}") as ch:
                self.assertTrue(pb_grpc.GRPCInferenceServiceStub(ch).ServerLive(pb.ServerLiveRequest(), timeout=30).live)
        finally:
            proc.terminate()
            self.assertEqual(proc.wait(timeout=ts.STOP_TIMEOUT_S), 0, proc.stderr.read().decode())

    @staticmethod
    def try_get(url):
        try:
            return ts.requests.get(url, timeout=5)
        except ts.requests.ConnectionError:
            return None

    def test_ipv6_loopback(self):
        try:
            with socket.socket(socket.AF_INET6) as s:
                s.bind(("::1", 0))
        except OSError as e:
            self.skipTest(f"this machine has no IPv6 loopback ({e})")
        self.run_on("::1", "[::1]")

    def test_host_name(self):
        self.run_on("localhost", "localhost")


if __name__ == "__main__":
    unittest.main()


class GrpcControlTestCase(GrpcServerTestCase):
    """A server with a folder of its own (cls.tmp) and the Control stub."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mcp-e2e-" + cls.__name__.lower() + "-")
        try:
            super().setUpClass()
        except BaseException:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise
        cls.control = cp_grpc.ControlStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            shutil.rmtree(cls.tmp, ignore_errors=True)


class GrpcControlTests(GrpcControlTestCase):
    """mcp.control.v1.Control: the rollout calls over gRPC, with the same
    JSON as HTTP and the same refusals."""

    @classmethod
    def server_args(cls):
        cls.model = os.path.join(cls.tmp, "digits.onnx")
        shutil.copy(ts.DIGITS, cls.model)
        cls.grpc_port = free_port()
        return ["--model-root", cls.tmp, "--grpc-port", cls.grpc_port]

    def test_rollout_over_grpc(self):
        for v in ("v1.0.0", "v1.1.0"):
            r = self.call("POST", "/v2/repository/models/digits/load",
                          json_body={"parameters": {"config": ts.digits_descriptor("digits", self.model, version=v)}})
            self.assertEqual(r.status_code, 200, r.text)
        st = json.loads(self.control.RolloutStatus(cp.RolloutStatusRequest(model_name="digits"), timeout=30).status_json)
        self.assertEqual((st["primary"], st["previous"]), ("v1.1.0", "v1.0.0"))
        self.assertEqual(st, ts.http(self.server, "GET", "/v2/models/digits/rollout").json(), "the same JSON as HTTP")
        body = json.dumps({"action": "set-weight", "weights": {"v1.0.0": 40}})
        st = json.loads(self.control.Rollout(cp.RolloutRequest(model_name="digits", request_json=body), timeout=30).status_json)
        self.assertEqual(st["canary"], {"version": "v1.0.0", "weight": 40})
        promote = json.dumps({"action": "promote", "version": "v1.0.0"})
        st = json.loads(self.control.Rollout(cp.RolloutRequest(model_name="digits", request_json=promote),
                                             timeout=30).status_json)
        self.assertEqual((st["primary"], st["canary"], st["previous"]), ("v1.0.0", None, "v1.1.0"))
        st = json.loads(self.control.Rollout(cp.RolloutRequest(model_name="digits", request_json='{"action": "undo"}'),
                                             timeout=30).status_json)
        self.assertEqual((st["primary"], st["previous"]), ("v1.1.0", "v1.0.0"))
        msg = self.expect_code(grpc.StatusCode.INVALID_ARGUMENT, self.control.Rollout,
                               cp.RolloutRequest(model_name="digits", request_json='{"action": "launch"}'))
        self.assertIn("unknown action", msg)
        msg = self.expect_code(grpc.StatusCode.INVALID_ARGUMENT, self.control.Rollout,
                               cp.RolloutRequest(model_name="digits", request_json="{nope"))
        self.assertIn("malformed JSON", msg)
        self.expect_code(grpc.StatusCode.RESOURCE_EXHAUSTED, self.control.Rollout,
                         cp.RolloutRequest(model_name="digits", request_json="{" + " " * 70000 + "}"))
        self.expect_code(grpc.StatusCode.INVALID_ARGUMENT, self.control.Rollout, cp.RolloutRequest(request_json="{}"))
        self.expect_code(grpc.StatusCode.NOT_FOUND, self.control.RolloutStatus, cp.RolloutStatusRequest(model_name="nope"))
        msg = self.expect_code(grpc.StatusCode.NOT_FOUND, self.control.Rollout,
                               cp.RolloutRequest(model_name="digits",
                                                 request_json='{"action": "promote", "version": "v9.9.9"}'))
        self.assertIn("no loaded version 'v9.9.9'", msg)


class GrpcTokenTests(GrpcControlTestCase):
    """With --admin-token-file, the management calls over gRPC (repository
    load and unload, the rollout calls) need 'authorization: Bearer <token>'
    metadata; inference does not."""
    TOKEN = "grpc-s3cret-token-42"

    @classmethod
    def server_args(cls):
        cls.EXTRA = ("--admin-token-file", ts.write_token_file(cls.tmp, cls.TOKEN))
        return super().server_args()

    def test_management_needs_the_token(self):
        calls = [
            (self.control.RolloutStatus, cp.RolloutStatusRequest(model_name="digits")),
            (self.control.Rollout, cp.RolloutRequest(model_name="digits", request_json='{"action": "undo"}')),
            (self.stub.RepositoryModelUnload, pb.RepositoryModelUnloadRequest(model_name="digits")),
        ]
        for fn, req in calls:
            for md in ((), (("authorization", "Bearer wrong"),)):
                self.expect_code(grpc.StatusCode.UNAUTHENTICATED, fn, req, metadata=md)
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name="digits"), timeout=30).ready, "nothing ran")
        auth = (("authorization", "Bearer " + self.TOKEN),)
        st = json.loads(self.control.RolloutStatus(cp.RolloutStatusRequest(model_name="digits"), metadata=auth,
                                                   timeout=30).status_json)
        self.assertEqual(st["model"], "digits")
