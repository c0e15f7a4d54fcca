"""Self-test of schemas/openapi.json and tests/e2e/openapi_check.py.

Run from tests/e2e:  /usr/bin/python3 -m unittest -v test_openapi_check

The document must be valid OpenAPI 3.1 with JSON Schema 2020-12 schemas and
describe every HTTP endpoint of issue 3; the checker must accept bodies that
follow PROTOCOLS.md and reject ones that do not, saying where.
"""

import json
import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jsonschema  # noqa: E402

import openapi_check as oc  # noqa: E402

SPEC = oc.load_spec()
JSON = "application/json"
BIN = "application/octet-stream"


def j(value):
    return json.dumps(value).encode()


class DocumentTest(unittest.TestCase):
    def test_structure(self):
        self.assertEqual(oc.check_document(SPEC), [])

    def test_every_schema_is_2020_12(self):
        count = 0
        for loc, schema in oc.iter_schemas(SPEC):
            with self.subTest(schema=loc):
                jsonschema.Draft202012Validator.check_schema(schema)
            count += 1
        self.assertGreater(count, 40)

    def test_issue_endpoints(self):
        # (method, concrete path, operationId): every HTTP endpoint of issue 3.
        endpoints = [
            ("GET", "/v2/health/live", "serverLive"),
            ("GET", "/v2/health/ready", "serverReady"),
            ("GET", "/v2", "serverMetadata"),
            ("GET", "/v2/models/digits", "modelMetadata"),
            ("GET", "/v2/models/digits/versions/v1.0.0", "modelMetadataVersion"),
            ("GET", "/v2/models/digits/ready", "modelReady"),
            ("GET", "/v2/models/digits/versions/v1.0.0/ready", "modelReadyVersion"),
            ("POST", "/v2/models/digits/infer", "modelInfer"),
            ("POST", "/v2/models/digits/versions/v1.0.0/infer", "modelInferVersion"),
            ("POST", "/v2/models/chat/generate", "modelGenerate"),
            ("POST", "/v2/models/chat/versions/v1.0.0/generate", "modelGenerateVersion"),
            ("POST", "/v2/models/chat/generate_stream", "modelGenerateStream"),
            ("POST", "/v2/models/chat/versions/v1.0.0/generate_stream", "modelGenerateStreamVersion"),
            ("POST", "/v1/completions", "openaiCompletions"),
            ("POST", "/v1/chat/completions", "openaiChatCompletions"),
            ("GET", "/v2/models/stats", "modelStatisticsAll"),
            ("GET", "/v2/models/digits/stats", "modelStatistics"),
            ("GET", "/v2/models/digits/versions/v1.0.0/stats", "modelStatisticsVersion"),
            ("GET", "/v2/models/digits/config", "modelConfig"),
            ("POST", "/v2/repository/index", "repositoryIndex"),
            ("POST", "/v2/repository/models/digits/load", "repositoryModelLoad"),
            ("POST", "/v2/repository/models/digits/unload", "repositoryModelUnload"),
            ("GET", "/v2/repository/models/digits", "repositoryModelDescribe"),
            ("GET", "/v1/models", "v1ListModels"),
            ("GET", "/v1/models/digits", "v1ModelReady"),
            ("POST", "/v1/models/digits:predict", "v1Predict"),
            ("POST", "/v1/infer", "simpleInfer"),
            ("GET", "/metrics", "metrics"),
            ("GET", "/openapi.json", "openapi"),
        ]
        for method, path, op_id in endpoints:
            with self.subTest(path=path):
                _, op, _ = oc.find_operation(SPEC, method, path)
                self.assertEqual(op["operationId"], op_id)
        self.assertEqual(oc.find_operation(SPEC, "GET", "/v2/models/a%20b/versions/3?x=1")[2],
                         {"model": "a%20b", "version": "3"})

    def test_unknown_routes(self):
        with self.assertRaisesRegex(AssertionError, "no path .* matches GET /v3"):
            oc.find_operation(SPEC, "GET", "/v3")
        with self.assertRaisesRegex(AssertionError, "no DELETE operation"):
            oc.find_operation(SPEC, "DELETE", "/v2/models/digits")
        with self.assertRaisesRegex(AssertionError, "no GET operation"):
            oc.find_operation(SPEC, "GET", "/v1/models/digits:predict")

    def test_document_served_matches_itself(self):
        with open(oc.SPEC_PATH, "rb") as f:
            body = f.read()
        served = oc.validate_response(SPEC, "GET", "/openapi.json", 200, JSON, body)
        self.assertEqual(served["openapi"], "3.1.0")


class ResponseTest(unittest.TestCase):
    def ok(self, method, path, status, body, content_type=JSON, headers=None):
        raw = body if isinstance(body, bytes) else j(body)
        return oc.validate_response(SPEC, method, path, status, content_type, raw, headers)

    def bad(self, pattern, method, path, status, body, content_type=JSON, headers=None):
        raw = body if isinstance(body, bytes) else j(body)
        with self.assertRaisesRegex(AssertionError, pattern):
            oc.validate_response(SPEC, method, path, status, content_type, raw, headers)

    def test_health(self):
        self.ok("GET", "/v2/health/live", 200, {"live": True})
        self.ok("GET", "/v2/health/ready", 200, {"ready": True})
        self.ok("GET", "/v2/health/ready", 503, {"ready": False})
        self.ok("GET", "/v2/health/ready", 503, {"error": "server is shutting down"})
        self.ok("GET", "/v2/models/m/ready", 404, {"ready": False})
        self.bad(r"\$\.live: 'yes' is not of type 'boolean'", "GET", "/v2/health/live", 200, {"live": "yes"})
        self.bad("'ready' is a required property", "GET", "/v2/health/ready", 200, {})
        self.bad("not valid under any", "GET", "/v2/health/ready", 503, {"ready": True})

    def test_server_metadata(self):
        good = {"name": "mcp2026", "version": "0.1.0",
                "extensions": ["binary_tensor_data", "model_repository", "statistics", "schedule_policy"]}
        self.ok("GET", "/v2", 200, good)
        self.bad("'extensions' is a required property", "GET", "/v2", 200, {"name": "mcp2026", "version": "0.1.0"})
        self.bad("non-unique", "GET", "/v2", 200, dict(good, extensions=["statistics", "statistics"]))

    def test_model_metadata(self):
        good = {"name": "digits", "versions": ["v1.0.0"], "platform": "onnx_onnxv1",
                "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, 64]}],
                "outputs": [{"name": "probabilities", "datatype": "FP32", "shape": [-1, 10]}]}
        self.ok("GET", "/v2/models/digits", 200, good)
        self.ok("GET", "/v2/models/digits/versions/v1.0.0", 200, good)
        self.bad("'platform' is a required property", "GET", "/v2/models/digits", 200,
                 {k: v for k, v in good.items() if k != "platform"})
        self.bad(r"\$\.platform: 'onnxruntime_onnx' is not one of", "GET", "/v2/models/digits", 200,
                 dict(good, platform="onnxruntime_onnx"))
        self.bad(r"\$\.inputs\[0\]\.datatype: 'FLOAT32' is not one of", "GET", "/v2/models/digits", 200,
                 dict(good, inputs=[{"name": "input", "datatype": "FLOAT32", "shape": [1]}]))
        self.bad(r"\$\.outputs\[0\]\.shape\[1\]: 2\.5 is not of type 'integer'", "GET", "/v2/models/digits", 200,
                 dict(good, outputs=[{"name": "p", "datatype": "FP32", "shape": [1, 2.5]}]))
        self.bad(r"\$\.outputs\[0\]\.shape\[0\]: -2 is less than the minimum", "GET", "/v2/models/digits", 200,
                 dict(good, outputs=[{"name": "p", "datatype": "FP32", "shape": [-2]}]))
        self.bad("Additional properties are not allowed", "GET", "/v2/models/digits", 200, dict(good, extra=1))

    def test_errors(self):
        self.ok("GET", "/v2/models/nope", 404, {"error": "unknown model 'nope'"})
        self.ok("POST", "/v2/models/m/infer", 400, {"error": "malformed JSON at byte offset 7"})
        self.ok("POST", "/v2/models/m/infer", 413, {"error": "too big"})
        self.ok("POST", "/v2/models/m/infer", 429, {"error": "queue full"})
        self.ok("POST", "/v1/infer", 504, {"error": "timed out"})
        self.ok("GET", "/v2", 418, {"error": "falls to default"})
        self.bad("'error' is a required property", "GET", "/v2/models/nope", 404, {"message": "x"})
        self.bad("Additional properties", "GET", "/v2/models/nope", 404, {"error": "x", "code": 404})
        self.bad("should be non-empty|is too short", "GET", "/v2/models/nope", 404, {"error": ""})
        self.bad("not valid JSON", "GET", "/v2/models/nope", 404, b"<html>not found</html>")
        self.bad("not valid JSON: .*NaN", "GET", "/v2/models/nope", 404, b'{"error": NaN}')
        self.bad("duplicate key", "GET", "/v2/models/nope", 404, b'{"error": "a", "error": "b"}')
        self.bad("Content-Type 'text/html'", "GET", "/v2/models/nope", 404, {"error": "x"}, "text/html")

    def test_infer_json(self):
        good = {"model_name": "digits", "model_version": "v1.0.0", "id": "42",
                "outputs": [{"name": "probabilities", "shape": [1, 2], "datatype": "FP32", "data": [0.25, 0.75]},
                            {"name": "label", "shape": [1], "datatype": "INT64", "data": [[1]]},
                            {"name": "ok", "shape": [2], "datatype": "BOOL", "data": [True, False]},
                            {"name": "tag", "shape": [1], "datatype": "BYTES", "data": ["seven"]}]}
        self.ok("POST", "/v2/models/digits/infer", 200, good)
        self.ok("POST", "/v2/models/digits/versions/v1.0.0/infer", 200, good, "application/json; charset=utf-8")
        self.bad("'id' is a required property", "POST", "/v2/models/digits/infer", 200,
                 {k: v for k, v in good.items() if k != "id"})
        out = dict(good["outputs"][0])
        self.bad(r"\$\.outputs\[0\]", "POST", "/v2/models/digits/infer", 200,
                 dict(good, outputs=[dict(out, data=[{"x": 1}])]))
        self.bad(r"\$\.outputs\[0\]", "POST", "/v2/models/digits/infer", 200,
                 dict(good, outputs=[dict(out, datatype="FP33")]))
        # data and binary_data_size together, or neither.
        self.bad(r"\$\.outputs\[0\]", "POST", "/v2/models/digits/infer", 200,
                 dict(good, outputs=[dict(out, parameters={"binary_data_size": 8})]))
        self.bad(r"\$\.outputs\[0\]", "POST", "/v2/models/digits/infer", 200,
                 dict(good, outputs=[{k: v for k, v in out.items() if k != "data"}]))
        self.bad(r"\$\.parameters\.x", "POST", "/v2/models/digits/infer", 200, dict(good, parameters={"x": [1]}))

    @staticmethod
    def binary_body(header, blob):
        h = j(header)
        return h + blob, {"Inference-Header-Content-Length": str(len(h))}

    def test_infer_binary(self):
        fp32 = struct.pack("<2f", 0.25, 0.75)
        strings = struct.pack("<I", 2) + b"ab" + struct.pack("<I", 1) + b"c"
        header = {"model_name": "digits", "id": "",
                  "outputs": [{"name": "p", "shape": [1, 2], "datatype": "FP32",
                               "parameters": {"binary_data_size": len(fp32)}},
                              {"name": "label", "shape": [1], "datatype": "INT64", "data": [3]},
                              {"name": "s", "shape": [2], "datatype": "BYTES",
                               "parameters": {"binary_data_size": len(strings)}},
                              {"name": "b", "shape": [3], "datatype": "BOOL",
                               "parameters": {"binary_data_size": 3}}]}
        body, headers = self.binary_body(header, fp32 + strings + b"\x01\x00\x01")
        got_header, got_blob = self.ok("POST", "/v2/models/digits/infer", 200, body, BIN, headers)
        self.assertEqual(got_header["outputs"][1]["data"], [3])
        self.assertEqual(len(got_blob), 8 + 11 + 3)
        lower = {k.lower(): v for k, v in headers.items()}
        self.ok("POST", "/v2/models/digits/infer", 200, body, BIN, lower)

        self.bad("without the Inference-Header-Content-Length", "POST", "/v2/models/digits/infer", 200, body, BIN)
        self.bad("binary part is 23 bytes, the JSON header announces 22", "POST", "/v2/models/digits/infer", 200,
                 body + b"\x00", BIN, headers)
        self.bad("runs past the body", "POST", "/v2/models/digits/infer", 200, body[:-4], BIN, headers)
        self.bad(r"exceeds the body", "POST", "/v2/models/digits/infer", 200, body, BIN,
                 {"Inference-Header-Content-Length": str(len(body) + 1)})
        self.bad("JSON header is not valid JSON", "POST", "/v2/models/digits/infer", 200, body, BIN,
                 {"Inference-Header-Content-Length": "5"})
        self.bad("cannot be empty", "POST", "/v2/models/digits/infer", 200, body, BIN,
                 {"Inference-Header-Content-Length": "0"})
        self.bad("not a non-negative integer", "POST", "/v2/models/digits/infer", 200, body, BIN,
                 {"Inference-Header-Content-Length": "-3"})
        wrong = json.loads(json.dumps(header))
        wrong["outputs"][0]["parameters"]["binary_data_size"] = 4
        body2, headers2 = self.binary_body(wrong, struct.pack("<f", 1) + strings + b"\x01\x00\x01")
        self.bad(r"outputs\[0\] 'p': binary_data_size 4, but FP32 \[1, 2\] needs 8 bytes", "POST",
                 "/v2/models/digits/infer", 200, body2, BIN, headers2)
        wrong = json.loads(json.dumps(header))
        wrong["outputs"][2]["shape"] = [3]
        body3, headers3 = self.binary_body(wrong, fp32 + strings + b"\x01\x00\x01")
        self.bad(r"2 BYTES elements, shape \[3\] needs 3", "POST", "/v2/models/digits/infer", 200, body3, BIN,
                 headers3)
        cut = struct.pack("<I", 9) + b"ab"
        wrong = json.loads(json.dumps(header))
        wrong["outputs"][2]["parameters"]["binary_data_size"] = len(cut)
        body4, headers4 = self.binary_body(wrong, fp32 + cut + b"\x01\x00\x01")
        self.bad("BYTES element 0 runs past", "POST", "/v2/models/digits/infer", 200, body4, BIN, headers4)
        wrong = json.loads(json.dumps(header))
        wrong["outputs"][0]["datatype"] = "FP128"
        body5, headers5 = self.binary_body(wrong, fp32 + strings + b"\x01\x00\x01")
        self.bad(r"(?s)JSON header does not match.*outputs\[0\]", "POST", "/v2/models/digits/infer", 200, body5, BIN,
                 headers5)

    def test_repository(self):
        self.ok("POST", "/v2/repository/index", 200,
                [{"name": "digits", "version": "v1.0.0", "state": "READY", "reason": ""},
                 {"name": "broken", "version": "v1.0.0", "state": "UNAVAILABLE", "reason": "file not found"}])
        self.ok("POST", "/v2/repository/index", 200, [])
        self.bad(r"\$\[0\]\.state: 'LOADED' is not one of", "POST", "/v2/repository/index", 200,
                 [{"name": "digits", "version": "v1.0.0", "state": "LOADED", "reason": ""}])
        self.bad(r"\$\[0\]: 'reason' is a required", "POST", "/v2/repository/index", 200,
                 [{"name": "digits", "version": "v1.0.0", "state": "READY"}])
        self.ok("POST", "/v2/repository/models/digits/load", 200, b"", JSON)
        self.ok("POST", "/v2/repository/models/digits/load", 200, b"", None)
        self.ok("POST", "/v2/repository/models/digits/unload", 200, b"", JSON)
        self.ok("POST", "/v2/repository/models/digits/load", 400,
                {"error": "invalid model descriptor: config:3:7: batch_size: must be a positive integer"})
        self.ok("POST", "/v2/repository/models/digits/load", 403, {"error": "model control is disabled"})
        self.bad("describes no body", "POST", "/v2/repository/models/digits/unload", 200, {"ok": True})

    def test_describe(self):
        stats = {"name": "digits", "version": "v1.0.0", "last_inference": 1700000000000, "inference_count": 3,
                 "execution_count": 2,
                 "inference_stats": {"success": {"count": 3, "ns": 900}, "fail": {"count": 0, "ns": 0},
                                     "queue": {"count": 3, "ns": 300}, "compute_infer": {"count": 3, "ns": 600}},
                 "queue_depth": 0}
        config = {"name": "digits", "platform": "onnxruntime_onnx", "backend": "mcp", "max_batch_size": 32,
                  "input": [{"name": "input", "data_type": "TYPE_FP32", "dims": [64]}],
                  "output": [{"name": "probabilities", "data_type": "TYPE_FP32", "dims": [10]}],
                  "instance_group": [{"kind": "KIND_CPU", "count": 1}],
                  "dynamic_batching": {"preferred_batch_size": [8, 16], "max_queue_delay_microseconds": 500,
                                       "default_queue_policy": {"max_queue_size": 1024,
                                                                "default_timeout_microseconds": 0}},
                  "version": "v1.0.0"}
        good = {"name": "digits", "version": "v1.0.0", "state": "READY", "reason": "", "path": "/m/digits.onnx",
                "memory_bytes": 4096, "config": config, "stats": stats}
        self.ok("GET", "/v2/repository/models/digits", 200, good)
        self.ok("GET", "/v2/repository/models/digits", 200,
                {"name": "digits", "version": "v1.0.0", "state": "UNAVAILABLE", "reason": "unloaded"})
        self.ok("GET", "/v2/models/digits/config", 200, config)
        self.ok("GET", "/v2/models/stats", 200, {"model_stats": [stats]})
        self.ok("GET", "/v2/models/digits/versions/v1.0.0/stats", 200, {"model_stats": [stats]})
        self.bad(r"\$\.model_stats\[0\]\.inference_stats\.queue: 'ns' is a required", "GET",
                 "/v2/models/digits/stats", 200,
                 {"model_stats": [dict(stats, inference_stats=dict(stats["inference_stats"], queue={"count": 1}))]})
        self.bad(r"\$\.model_stats\[0\]\.inference_count: -1 is less than", "GET", "/v2/models/stats", 200,
                 {"model_stats": [dict(stats, inference_count=-1)]})
        self.bad(r"\$\.input\[0\]\.data_type: 'FP32' is not one of", "GET", "/v2/models/digits/config", 200,
                 dict(config, input=[{"name": "input", "data_type": "FP32", "dims": [64]}]))
        self.bad(r"\$\.config\.max_batch_size", "GET", "/v2/repository/models/digits", 200,
                 dict(good, config=dict(config, max_batch_size="32")))

    def test_kserve_v1(self):
        m = {"object": "model", "created": 1796594232, "owned_by": "mcp2026"}
        self.ok("GET", "/v1/models", 200, {"models": ["digits", "tiny"], "object": "list",
                                          "data": [dict(m, id="digits"), dict(m, id="tiny")]})
        self.bad("'data' is a required", "GET", "/v1/models", 200, {"models": ["digits"], "object": "list"})
        self.ok("GET", "/v1/models/digits", 200, dict(m, name="digits", ready=True, id="digits"))
        self.ok("POST", "/v1/models/digits:predict", 200, {"predictions": [[0.25, 0.75], [0.5, 0.5]]})
        self.ok("POST", "/v1/models/digits:predict", 200, {"predictions": [{"p": [0.25, 0.75], "label": 1}]})
        self.ok("POST", "/v1/models/digits:predict", 404, {"error": "unknown model 'digits'"})
        self.bad("'predictions' is a required", "POST", "/v1/models/digits:predict", 200, {"outputs": [1]})
        self.bad(r"\$\.predictions\[0\]", "POST", "/v1/models/digits:predict", 200, {"predictions": [None]})
        self.bad(r"\$\.models\[0\]: 3 is not of type 'string'", "GET", "/v1/models", 200,
                 {"models": [3], "object": "list", "data": []})

    def test_simple(self):
        self.ok("POST", "/v1/infer", 200, {"output": [0.25, 0.75], "shape": [1, 2], "model": "digits"})
        self.bad("'model' is a required", "POST", "/v1/infer", 200, {"output": [0.25], "shape": [1]})
        self.bad(r"\$\.output\[0\]: \[0\.25\] is not of type 'number'", "POST", "/v1/infer", 200,
                 {"output": [[0.25]], "shape": [1], "model": "m"})

    def test_metrics(self):
        text = b"# HELP mcp_models_loaded Model versions loaded.\n# TYPE mcp_models_loaded gauge\nmcp_models_loaded 1\n"
        got = self.ok("GET", "/metrics", 200, text, "text/plain; version=0.0.4")
        self.assertIn("mcp_models_loaded 1", got)
        self.ok("GET", "/metrics", 200, text, "text/plain; version=0.0.4; charset=utf-8")
        self.bad("Content-Type 'text/plain'", "GET", "/metrics", 200, text, "text/plain")
        self.bad("Content-Type 'application/json'", "GET", "/metrics", 200, text, JSON)
        self.bad("not UTF-8", "GET", "/metrics", 200, b"\xff\xfe", "text/plain; version=0.0.4")


class RequestTest(unittest.TestCase):
    def test_requests(self):
        good = {"id": "7", "parameters": {"priority": 1, "timeout": 5000, "binary_data_output": True},
                "inputs": [{"name": "input", "shape": [1, 2], "datatype": "FP32", "data": [[1, 2]]}],
                "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}]}
        oc.validate_request(SPEC, "POST", "/v2/models/digits/infer", JSON, j(good))
        with self.assertRaisesRegex(AssertionError, r"\$\.parameters\.timeout"):
            oc.validate_request(SPEC, "POST", "/v2/models/digits/infer", JSON,
                                j(dict(good, parameters={"timeout": -1})))
        with self.assertRaisesRegex(AssertionError, r"\$\.inputs: \[\] should be non-empty|is too short"):
            oc.validate_request(SPEC, "POST", "/v2/models/digits/infer", JSON, j(dict(good, inputs=[])))
        # Binary input, and the raw form (Inference-Header-Content-Length: 0).
        h = j({"inputs": [{"name": "input", "shape": [1, 2], "datatype": "FP32",
                           "parameters": {"binary_data_size": 8}}]})
        blob = struct.pack("<2f", 1, 2)
        oc.validate_request(SPEC, "POST", "/v2/models/digits/infer", BIN, h + blob,
                            {"Inference-Header-Content-Length": str(len(h))})
        oc.validate_request(SPEC, "POST", "/v2/models/digits/infer", BIN, blob,
                            {"Inference-Header-Content-Length": "0"})
        oc.validate_request(SPEC, "POST", "/v1/models/digits:predict", JSON, j({"instances": [[1, 2]]}))
        oc.validate_request(SPEC, "POST", "/v1/models/digits:predict", JSON, j({"inputs": {"input": [[1, 2]]}}))
        with self.assertRaises(AssertionError):
            oc.validate_request(SPEC, "POST", "/v1/models/digits:predict", JSON,
                                j({"instances": [[1]], "inputs": [[1]]}))
        oc.validate_request(SPEC, "POST", "/v1/infer", JSON, j({"input": [1, 2], "shape": [1, 2]}))
        oc.validate_request(SPEC, "POST", "/v2/repository/models/digits/load", JSON,
                            j({"parameters": {"config": "name: digits\nformat: onnx\npath: d.onnx\n"}}))
        oc.validate_request(SPEC, "POST", "/v2/repository/models/digits/load", None, b"")
        with self.assertRaisesRegex(AssertionError, r"\$\.parameters\.config: 3 is not of type 'string'"):
            oc.validate_request(SPEC, "POST", "/v2/repository/models/digits/load", JSON,
                                j({"parameters": {"config": 3}}))
        oc.validate_request(SPEC, "POST", "/v2/repository/index", JSON, j({"ready": True}))


if __name__ == "__main__":
    unittest.main()
