#!/usr/bin/python3
"""OpenTelemetry tracing end to end (issue 13).

A real server exports spans over OTLP/HTTP to a local collector
(tests/e2e/node/otlp_collector.cjs) that decodes them with an independent
implementation, the protobuf classes of the npm package
@opentelemetry/otlp-transformer (tools/fetch-node-clients.sh installs it).
The tests check what a client's trace turns into: its trace id kept, our
server span under its span, the stages under ours with their attributes,
our traceparent echoed (HTTP header, gRPC initial metadata); the samplers'
ratios within statistical bounds; Triton's trace settings API; the
OpenTelemetry environment variables; and that a collector that never
answers costs no request anything.

Run one class by hand:
  MCP_SERVER_BIN=build/bin/mcp2026-server MCPCTL_BIN=build/bin/mcpctl \\
    /usr/bin/python3 -m unittest -v test_trace.TraceTests
"""
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

import numpy as np

import test_grpc as tg
import test_server as ts

NODE_CLIENTS = os.environ.get("MCP_NODE_CLIENTS_DIR", os.path.join(ts.SOURCE_DIR, ".cache", "node"))
COLLECTOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node", "otlp_collector.cjs")
STAGES = ["receive", "decode", "queue", "batch", "compute", "encode", "send"]
WAIT_S = 60  # spans reach the collector within the export interval (1 s); bounded polls


def setUpModule():
    tg.setUpModule()


def tearDownModule():
    tg.tearDownModule()


class Collector:
    """The Node.js OTLP/HTTP collector as a subprocess on 127.0.0.1."""

    def __init__(self, hang=False):
        self.dir = tempfile.mkdtemp(prefix="mcp-otlp-")
        self.out = os.path.join(self.dir, "spans.jsonl")
        open(self.out, "w").close()
        if not os.path.isdir(os.path.join(NODE_CLIENTS, "node_modules", "@opentelemetry", "otlp-transformer")):
            raise AssertionError("@opentelemetry/otlp-transformer is missing: run tools/fetch-node-clients.sh (make fetch)")
        env = dict(os.environ, MCP_NODE_CLIENTS_DIR=NODE_CLIENTS)
        self.proc = subprocess.Popen(["node", COLLECTOR, self.out] + (["--hang"] if hang else []),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        line = self.proc.stdout.readline().decode()
        m = re.match(r"listening (\d+)", line)
        if not m:
            self.stop()
            raise AssertionError(f"collector did not start: {line!r} {self.proc.stderr.read().decode(errors='replace')}")
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}"

    def spans(self):
        with open(self.out) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        errors = [r["error"] for r in rows if "error" in r]
        if errors:
            raise AssertionError(f"the collector could not decode an export: {errors[0]}")
        return rows

    def trace(self, trace_id, count=1 + len(STAGES) - 1):
        """The spans of one trace, once at least `count` arrived (bounded wait)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            got = [s for s in self.spans() if s["trace_id"] == trace_id]
            if len(got) >= count or time.monotonic() > deadline:
                return got
            time.sleep(0.1)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc.stdout.close()
        self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def random_hex(n):
    return os.urandom(n).hex()


def metric(server, name, **labels):
    _, samples = ts.parse_metrics(ts.http(server, "GET", "/metrics").text)
    return ts.metric_sum(samples, name, **labels)


class TracedServerTestCase(tg.GrpcServerTestCase):
    """A server with gRPC, exporting to a collector started first (one
    that never answers with HANG)."""
    TRACE_ARGS = ()
    HANG = False

    @classmethod
    def server_args(cls):
        return super().server_args() + ["--trace-endpoint", cls.collector.url + "/v1/traces", *cls.TRACE_ARGS]

    @classmethod
    def setUpClass(cls):
        cls.collector = Collector(hang=cls.HANG)
        try:
            super().setUpClass()
        except BaseException:
            cls.collector.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.collector.stop()

    def infer_http(self, headers=None, path="/v2/models/digits/infer", body=None):
        r = self.call("POST", path, json_body=body or ts.digits_v2_body(), headers=headers)
        return r

    def infer_grpc(self, metadata=()):
        arr = ts.samples()[0].astype(np.float32)
        req = tg.infer_request("digits", "input", "FP32", arr, raw=True)
        resp, call = self.stub.ModelInfer.with_call(req, metadata=list(metadata), timeout=ts.HTTP_TIMEOUT_S)
        return resp, call

    def check_tree(self, spans, trace_id, parent_id, server_name, stages=STAGES):
        """One server span under parent_id (or a root), every stage under it, in its time."""
        servers = [s for s in spans if s["kind"] == 2]
        self.assertEqual(len(servers), 1, f"one server span per call: {spans}")
        sv = servers[0]
        self.assertEqual(sv["trace_id"], trace_id)
        self.assertEqual(sv["parent_span_id"], parent_id or "")
        self.assertEqual(sv["name"], server_name)
        self.assertEqual(len(sv["span_id"]), 16)
        self.assertEqual(sv["resource"].get("service.name"), self.SERVICE)
        children = {s["name"]: s for s in spans if s["kind"] == 1}
        self.assertEqual(sorted(children), sorted(stages), "the stages of a traced call")
        start, end = int(sv["start"]), int(sv["end"])
        self.assertLess(start, end)
        for name in stages:
            c = children[name]
            self.assertEqual(c["parent_span_id"], sv["span_id"], name)
            self.assertEqual(c["trace_id"], trace_id, name)
            self.assertNotEqual(c["span_id"], sv["span_id"])
            self.assertLessEqual(start, int(c["start"]), name)
            self.assertLessEqual(int(c["start"]), int(c["end"]), name)
            self.assertLessEqual(int(c["end"]), end, name)
            self.assertEqual(c["attributes"].get("mcp.model"), "digits", name)
            self.assertEqual(c["attributes"].get("mcp.model_version"), "v1.0.0", name)
        # The stages follow each other.
        order = [children[n] for n in stages]
        for a, b in zip(order, order[1:]):
            self.assertLessEqual(int(a["start"]), int(b["start"]), f"{a['name']} before {b['name']}")
        self.assertEqual(children["compute"]["attributes"].get("mcp.batch_size"), 1)
        return sv, children

    SERVICE = "mcp2026-server"


class TraceTests(TracedServerTestCase):
    def test_http_trace_continues_the_client_trace(self):
        trace_id, parent = random_hex(16), random_hex(8)
        r = self.infer_http(headers={"traceparent": f"00-{trace_id}-{parent}-01", "tracestate": "vendor=abc,other=1",
                                     "tenant": "team-a"},
                            body=dict(ts.digits_v2_body(), parameters={"priority": 2}))
        self.assertEqual(r.status_code, 200, r.text)
        echoed = r.headers.get("traceparent", "")
        m = re.fullmatch(r"00-([0-9a-f]{32})-([0-9a-f]{16})-01", echoed)
        self.assertTrue(m, f"traceparent echoed: {echoed!r}")
        self.assertEqual(m.group(1), trace_id)
        self.assertNotEqual(m.group(2), parent)
        spans = self.collector.trace(trace_id, 1 + len(STAGES))
        sv, children = self.check_tree(spans, trace_id, parent, "POST /v2/models/{mv}/infer")
        self.assertEqual(sv["span_id"], m.group(2), "the echoed span is our server span")
        self.assertEqual(sv["trace_state"], "vendor=abc,other=1")
        a = sv["attributes"]
        self.assertEqual(a.get("http.request.method"), "POST")
        self.assertEqual(a.get("http.route"), "/v2/models/{mv}/infer")
        self.assertEqual(a.get("http.response.status_code"), 200)
        self.assertEqual(a.get("mcp.model"), "digits")
        self.assertEqual(a.get("mcp.model_version"), "v1.0.0")
        self.assertEqual(a.get("mcp.tenant"), "team-a")
        self.assertEqual(a.get("mcp.priority"), 2)
        self.assertEqual(a.get("mcp.batch_size"), 1)
        self.assertEqual(a.get("mcp.protocol"), "v2")
        self.assertEqual(children["queue"]["attributes"].get("mcp.priority"), 2)
        self.assertEqual(children["queue"]["attributes"].get("mcp.tenant"), "team-a")
        self.assertEqual(sv["status_code"], 0, "a successful call leaves the status unset")

    def test_grpc_trace_continues_the_client_trace(self):
        trace_id, parent = random_hex(16), random_hex(8)
        resp, call = self.infer_grpc(metadata=[("traceparent", f"00-{trace_id}-{parent}-01"), ("tenant", "team-b")])
        self.assertEqual(resp.model_name, "digits")
        md = dict(call.initial_metadata())
        m = re.fullmatch(r"00-([0-9a-f]{32})-([0-9a-f]{16})-01", md.get("traceparent", ""))
        self.assertTrue(m, f"traceparent in the initial metadata: {md}")
        self.assertEqual(m.group(1), trace_id)
        spans = self.collector.trace(trace_id, 1 + len(STAGES))
        sv, _ = self.check_tree(spans, trace_id, parent, "inference.GRPCInferenceService/ModelInfer")
        self.assertEqual(sv["span_id"], m.group(2))
        a = sv["attributes"]
        self.assertEqual(a.get("rpc.system"), "grpc")
        self.assertEqual(a.get("rpc.method"), "ModelInfer")
        self.assertEqual(a.get("rpc.grpc.status_code"), 0)
        self.assertEqual(a.get("mcp.tenant"), "team-b")
        self.assertEqual(a.get("mcp.protocol"), "grpc")

    def test_every_protocol_is_traced(self):
        predict = {"instances": [ts.samples()[0].reshape(-1).tolist()]}
        simple = {"input": ts.samples()[0].reshape(-1).tolist(), "shape": [1, 64]}
        for path, route, body in (("/v1/infer", "/v1/infer", simple),
                                  ("/v1/models/digits:predict", "/v1/models/{m}:predict", predict)):
            trace_id, parent = random_hex(16), random_hex(8)
            r = self.infer_http(headers={"traceparent": f"00-{trace_id}-{parent}-01"}, path=path, body=body)
            self.assertEqual(r.status_code, 200, r.text)
            spans = self.collector.trace(trace_id, 1 + len(STAGES))
            self.check_tree(spans, trace_id, parent, f"POST {route}")

    def test_new_trace_without_or_with_invalid_traceparent(self):
        for header in (None, "00-00000000000000000000000000000000-b7ad6b7169203331-01", "zz-bad", "00-" + "A" * 32 + "-" + "b" * 16 + "-01",
                       "ff-" + "a" * 32 + "-" + "b" * 16 + "-01"):
            r = self.infer_http(headers={"traceparent": header} if header else None)
            self.assertEqual(r.status_code, 200, r.text)
            m = re.fullmatch(r"00-([0-9a-f]{32})-([0-9a-f]{16})-01", r.headers.get("traceparent", ""))
            self.assertTrue(m, f"{header!r}: a new, sampled trace: {r.headers.get('traceparent')!r}")
            self.assertNotIn(m.group(1), (header or ""))
            spans = self.collector.trace(m.group(1), 1 + len(STAGES))
            sv, _ = self.check_tree(spans, m.group(1), None, "POST /v2/models/{mv}/infer")
            self.assertEqual(sv["trace_state"], "", "no tracestate without a valid parent")

    def test_hostile_context_stays_out_of_spans(self):
        # A tracestate past W3C's 512 characters, or with control bytes, is
        # dropped; a tenant outside the tenant rule is not an attribute.
        for state, tenant in (("a=" + "b" * 600, "t\u00e9"), ("x=1\x7f", "a b")):
            trace_id = random_hex(16)
            r = self.infer_http(headers={"traceparent": f"00-{trace_id}-{random_hex(8)}-01",
                                         "tracestate": state.encode("latin-1"), "tenant": tenant.encode("utf-8")})
            self.assertEqual(r.status_code, 200, r.text)
            (sv,) = [x for x in self.collector.trace(trace_id, 1 + len(STAGES)) if x["kind"] == 2]
            self.assertEqual(sv["trace_state"], "")
            self.assertNotIn("mcp.tenant", sv["attributes"])

    def test_parent_not_sampled_is_not_recorded(self):
        trace_id = random_hex(16)
        r = self.infer_http(headers={"traceparent": f"00-{trace_id}-{random_hex(8)}-00"})
        self.assertEqual(r.status_code, 200)
        self.assertTrue(r.headers.get("traceparent", "").endswith("-00"), r.headers.get("traceparent"))
        # A sampled call after it: once its spans are in, the unsampled one would have been too.
        later = random_hex(16)
        self.infer_http(headers={"traceparent": f"00-{later}-{random_hex(8)}-01"})
        self.assertTrue(self.collector.trace(later, 1 + len(STAGES)))
        self.assertEqual([s for s in self.collector.spans() if s["trace_id"] == trace_id], [])

    def test_errors_are_traced(self):
        trace_id = random_hex(16)
        body = {"inputs": [{"name": "input", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]}
        r = self.infer_http(headers={"traceparent": f"00-{trace_id}-{random_hex(8)}-01"}, body=body)
        self.assertEqual(r.status_code, 400)
        spans = self.collector.trace(trace_id, 4)
        sv = [s for s in spans if s["kind"] == 2][0]
        self.assertEqual(sv["attributes"].get("http.response.status_code"), 400)
        self.assertEqual(sv["status_code"], 0, "a 4xx is the client's fault: the server span is not an error")
        names = sorted(s["name"] for s in spans if s["kind"] == 1)
        self.assertEqual(names, ["decode", "encode", "receive", "send"], "no queue or compute for a refused call")

    def test_trace_settings_api(self):
        got = self.call("GET", "/v2/trace/setting").json()
        self.assertEqual(got["trace_level"], ["TIMESTAMPS"])
        self.assertEqual(got["trace_mode"], "opentelemetry")
        # Refusals name the setting.
        for body, word in (({"trace_file": "/tmp/x"}, "trace_file"), ({"trace_level": ["TENSORS"]}, "TENSORS"),
                           ({"trace_rate": "0"}, "trace_rate"), ({"trace_rate": "x"}, "trace_rate"),
                           ({"bogus": 1}, "bogus"), ({"trace_count": "-5"}, "trace_count"),
                           ({"trace_level": None}, "trace_level"), ([1], "object")):
            r = self.call("POST", "/v2/trace/setting", json_body=body)
            self.assertEqual(r.status_code, 400, (body, r.text))
            self.assertIn(word, r.json()["error"])
        r = self.call("POST", "/v2/trace/setting", json_body={"trace_level": ["OFF"]},
                      headers={"Origin": "http://evil.example"})
        self.assertEqual(r.status_code, 403, "a web page cannot change tracing")
        self.assertEqual(self.call("GET", "/v2/models/nosuch/trace/setting").status_code, 404)
        self.assertEqual(self.call("POST", "/v2/models/nosuch/trace/setting", json_body={"trace_level": ["OFF"]}).status_code, 404)
        try:
            # Off for the server: no traceparent echoed, nothing recorded.
            r = self.call("POST", "/v2/trace/setting", json_body={"trace_level": ["OFF"]})
            self.assertEqual(r.status_code, 200, r.text)
            self.assertEqual(r.json()["trace_level"], ["OFF"])
            before = metric(self.server, "mcp_trace_sampled_total")
            r = self.infer_http(headers={"traceparent": f"00-{random_hex(16)}-{random_hex(8)}-01"})
            self.assertNotIn("traceparent", r.headers)
            self.assertEqual(metric(self.server, "mcp_trace_sampled_total"), before)
            # On for the model only: its calls are traced again.
            r = self.call("POST", "/v2/models/digits/trace/setting", json_body={"trace_level": ["TIMESTAMPS"]})
            self.assertEqual(r.status_code, 200, r.text)
            self.assertEqual(r.json()["trace_level"], ["TIMESTAMPS"])
            self.assertEqual(self.call("GET", "/v2/trace/setting").json()["trace_level"], ["OFF"])
            trace_id, parent = random_hex(16), random_hex(8)
            r = self.infer_http(headers={"traceparent": f"00-{trace_id}-{parent}-01"})
            self.assertIn("traceparent", r.headers)
            self.check_tree(self.collector.trace(trace_id, 1 + len(STAGES)), trace_id, parent, "POST /v2/models/{mv}/infer")
            # trace_count: two more traces of this model, then none.
            r = self.call("POST", "/v2/models/digits/trace/setting", json_body={"trace_count": "2"})
            self.assertEqual(r.json()["trace_count"], "2")
            before = metric(self.server, "mcp_trace_sampled_total")
            for _ in range(5):
                self.infer_http()
            self.assertEqual(metric(self.server, "mcp_trace_sampled_total") - before, 2)
            self.assertEqual(self.call("GET", "/v2/models/digits/trace/setting").json()["trace_count"], "0")
            # null: the model follows the server again.
            r = self.call("POST", "/v2/models/digits/trace/setting", json_body={"trace_level": None, "trace_count": None})
            self.assertEqual(r.json()["trace_level"], ["OFF"])
        finally:
            self.call("POST", "/v2/trace/setting", json_body={"trace_level": ["TIMESTAMPS"], "trace_count": "-1"})
            self.call("POST", "/v2/models/digits/trace/setting", json_body={"trace_level": None, "trace_count": None})


class GenerateTraceTests(TracedServerTestCase):
    """Generation calls: queue, prefill and decode under the server span."""
    FORTUNES = os.path.join(ts.DEMO_DIR, "fortunes.gguf")
    GEN_STAGES = ["receive", "queue", "prefill", "decode", "send"]

    @classmethod
    def server_args(cls):
        return super().server_args() + ["--model-path", cls.FORTUNES]

    def check_generation(self, trace_id, parent, name, completion_tokens):
        spans = self.collector.trace(trace_id, 1 + len(self.GEN_STAGES))
        (sv,) = [s for s in spans if s["kind"] == 2]
        self.assertEqual(sv["name"], name)
        self.assertEqual(sv["parent_span_id"], parent)
        self.assertEqual(sv["attributes"].get("mcp.model"), "fortunes")
        self.assertGreater(sv["attributes"].get("mcp.prompt_tokens", 0), 0)
        self.assertEqual(sv["attributes"].get("mcp.completion_tokens"), completion_tokens)
        children = {s["name"]: s for s in spans if s["kind"] == 1}
        self.assertEqual(sorted(children), sorted(self.GEN_STAGES))
        for n in self.GEN_STAGES:
            self.assertEqual(children[n]["parent_span_id"], sv["span_id"], n)
            self.assertLessEqual(int(sv["start"]), int(children[n]["start"]), n)
            self.assertLessEqual(int(children[n]["end"]), int(sv["end"]), n)
        self.assertLessEqual(int(children["prefill"]["end"]), int(children["decode"]["start"]) + 1)
        return sv

    def test_generate_is_traced(self):
        trace_id, parent = random_hex(16), random_hex(8)
        r = self.call("POST", "/v2/models/fortunes/generate",
                      json_body={"text_input": "The fortune", "parameters": {"max_tokens": 8, "ignore_eos": True}},
                      headers={"traceparent": f"00-{trace_id}-{parent}-01"})
        self.assertEqual(r.status_code, 200, r.text)
        self.assertTrue(r.headers.get("traceparent", "").startswith(f"00-{trace_id}-"), r.headers)
        self.check_generation(trace_id, parent, "POST /v2/models/{mv}/generate", 8)

    def test_openai_stream_is_traced(self):
        trace_id, parent = random_hex(16), random_hex(8)
        r = self.call("POST", "/v1/completions", json_body={"model": "fortunes", "prompt": "A fortune", "max_tokens": 5,
                                                            "stream": True, "ignore_eos": True},
                      headers={"traceparent": f"00-{trace_id}-{parent}-01"})
        self.assertEqual(r.status_code, 200, r.text)
        self.assertIn("data: [DONE]", r.text)
        self.assertTrue(r.headers.get("traceparent", "").startswith(f"00-{trace_id}-"), r.headers)
        sv = self.check_generation(trace_id, parent, "POST /v1/completions", 5)
        self.assertEqual(sv["attributes"].get("mcp.protocol"), "openai")


    def test_grpc_stream_generation_is_traced(self):
        trace_id, parent = random_hex(16), random_hex(8)
        req = tg.gen_request("The fortune", req_id="g-1", max_tokens=6)
        req.parameters["ignore_eos"].bool_param = True
        finals = [r for r in self.stub.ModelStreamInfer(iter([req]), timeout=ts.HTTP_TIMEOUT_S,
                                                       metadata=[("traceparent", f"00-{trace_id}-{parent}-01")])
                  if not r.error_message and "triton_final_response" in r.infer_response.parameters]
        self.assertEqual(len(finals), 1)
        sv = self.check_generation(trace_id, parent, "inference.GRPCInferenceService/ModelStreamInfer", 6)
        self.assertEqual(sv["attributes"].get("mcp.request_id"), "g-1")
        self.assertEqual(sv["attributes"].get("rpc.method"), "ModelStreamInfer")


class RatioSamplerTests(TracedServerTestCase):
    """traceidratio at 0.25, then Triton's trace_rate at run time."""
    TRACE_ARGS = ("--trace-sampler", "parentbased_traceidratio", "--trace-sampler-arg", "0.25")
    N = 400

    def sampled_fraction(self, n, headers=lambda: None):
        before = metric(self.server, "mcp_trace_sampled_total")
        echoed = 0
        for _ in range(n):
            r = self.infer_http(headers=headers())
            self.assertEqual(r.status_code, 200)
            echoed += r.headers.get("traceparent", "").endswith("-01")
        got = metric(self.server, "mcp_trace_sampled_total") - before
        self.assertEqual(got, echoed, "the flags echoed say which calls were sampled")
        return got

    def assert_binomial(self, got, n, p):
        sd = math.sqrt(n * p * (1 - p))
        self.assertLessEqual(abs(got - n * p), 5 * sd, f"{got} of {n} sampled, expected {n * p:.0f} +- {5 * sd:.0f}")

    def test_ratio_holds(self):
        got = self.sampled_fraction(self.N)
        self.assert_binomial(got, self.N, 0.25)
        # The sampled calls' spans all reach the collector.
        deadline = time.monotonic() + WAIT_S
        while metric(self.server, "mcp_trace_spans_exported_total") < got * (1 + len(STAGES)) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertGreaterEqual(metric(self.server, "mcp_trace_spans_exported_total"), got * (1 + len(STAGES)))

    def test_parent_decides_over_ratio(self):
        got = self.sampled_fraction(40, lambda: {"traceparent": f"00-{random_hex(16)}-{random_hex(8)}-01"})
        self.assertEqual(got, 40)
        got = self.sampled_fraction(40, lambda: {"traceparent": f"00-{random_hex(16)}-{random_hex(8)}-00"})
        self.assertEqual(got, 0)

    def test_trace_rate_changes_sampling_at_run_time(self):
        try:
            r = self.call("POST", "/v2/trace/setting", json_body={"trace_rate": "10"})
            self.assertEqual(r.status_code, 200, r.text)
            self.assertEqual(r.json()["trace_rate"], "10")
            got = self.sampled_fraction(self.N)
            self.assert_binomial(got, self.N, 0.1)
        finally:
            self.call("POST", "/v2/trace/setting", json_body={"ratio": 0.25})


class EnvironmentTests(unittest.TestCase):
    """OTEL_* variables configure the exporter; flags are not needed."""

    def test_otel_variables(self):
        collector = Collector()
        env_keys = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER",
                    "OTEL_TRACES_SAMPLER_ARG")
        saved = {k: os.environ.get(k) for k in env_keys}
        os.environ.update(OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, OTEL_SERVICE_NAME="digits-svc",
                          OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test, team=ml%20ops",
                          OTEL_TRACES_SAMPLER="always_on", OTEL_TRACES_SAMPLER_ARG="0.5")
        server = ts.Server("--model-path", ts.DIGITS)
        try:
            server.start()
            got = ts.http(server, "GET", "/v2/trace/setting").json()
            self.assertEqual(got["sampler"], "always_on")
            self.assertEqual(got["endpoint"], collector.url + "/v1/traces")
            # always_on ignores an unsampled parent.
            trace_id = random_hex(16)
            r = ts.http(server, "POST", "/v2/models/digits/infer", json_body=ts.digits_v2_body(),
                        headers={"traceparent": f"00-{trace_id}-{random_hex(8)}-00"})
            self.assertEqual(r.status_code, 200)
            spans = collector.trace(trace_id, 1 + len(STAGES))
            self.assertEqual(len(spans), 1 + len(STAGES))
            res = spans[0]["resource"]
            self.assertEqual(res.get("service.name"), "digits-svc")
            self.assertEqual(res.get("deployment.environment"), "test")
            self.assertEqual(res.get("team"), "ml ops")
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            self.assertEqual(server.stop(), 0)
            collector.stop()

    def test_bad_settings_refuse_to_start(self):
        for args, word in ((["--trace-endpoint", "file:///etc/passwd"], "http"),
                           (["--trace-endpoint", "http://127.0.0.1:9/v1/traces", "--trace-sampler", "sometimes"], "sometimes"),
                           (["--trace-endpoint", "http://127.0.0.1:9/v1/traces", "--trace-sampler-arg", "2"], "0 to 1"),
                           (["--trace-endpoint", "http://127.0.0.1:9/v1/traces", "--trace-resource", "novalue"], "key=value")):
            p = subprocess.run([ts.SERVER_BIN, "--model-path", ts.DIGITS, "--port", "0", "--grpc-port", "0", *args],
                               capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(word, p.stderr.decode(), args)


class DeadCollectorTests(TracedServerTestCase):
    """A collector that accepts and never answers: calls are unaffected;
    the lost spans are counted."""
    HANG = True
    TRACE_ARGS = ("--trace-queue-size", "16")

    def test_requests_do_not_wait_for_the_collector(self):
        n = 200
        results = []
        lock = threading.Lock()

        def client(k):
            for _ in range(n // 4):
                r = self.call("POST", "/v2/models/digits/infer", json_body=ts.digits_v2_body(), timeout=30)
                with lock:
                    results.append((r.status_code, "traceparent" in r.headers))

        ts.run_concurrently([lambda k=k: client(k) for k in range(4)])
        self.assertEqual(len(results), n)
        self.assertTrue(all(code == 200 and echoed for code, echoed in results), results[:5])
        # The queue (16 calls) overflowed while the exporter waited on the
        # collector: those spans are counted as dropped, never waited for.
        dropped = metric(self.server, "mcp_trace_spans_dropped_total", reason="queue_full")
        self.assertGreater(dropped, 0)
        self.assertEqual(metric(self.server, "mcp_trace_sampled_total"), n)


if __name__ == "__main__":
    unittest.main()
