#!/usr/bin/python3
"""int8 quantization (issue 15): mcpctl quantize, and precision: int8 in
descriptors.

The digits demo (models/demo/digits.onnx, trained on scikit-learn's digits)
quantized with its training images as calibration keeps its accuracy on the
held-out images within half a point; the refusals name what is wrong. A
server loads an fp32 model with precision: int8, statically with a
calibration folder from its model root or dynamically without one, says so
in the model's description, serves the same labels, and refuses a
calibration folder outside the model roots or without precision int8.

Environment: MCPCTL_BIN (default build/bin/mcpctl) and MCP_SOURCE_DIR (the
repository). Needs Debian's python3-sklearn for the digits.

  MCPCTL_BIN=build/bin/mcpctl /usr/bin/python3 -m unittest -v test_quantize.QuantizeTests
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

import test_server as ts

SOURCE_DIR = os.environ.get("MCP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MCPCTL = os.environ.get("MCPCTL_BIN") or os.path.join(SOURCE_DIR, "build", "bin", "mcpctl")
DIGITS = os.path.join(SOURCE_DIR, "models", "demo", "digits.onnx")


def digits_split():
    """The split tools/make_demo_model.py trained on."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(d.data.astype(np.float32), d.target, test_size=0.25,
                                                        random_state=0)
    return x_train, x_test, y_test


def mcpctl(*args, timeout=300):
    return subprocess.run([MCPCTL] + list(args), capture_output=True, text=True, timeout=timeout)


class QuantizeTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mcp-e2e-quantize-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def labels(self, model, x):
        xf = os.path.join(self.tmp, "x.npy")
        np.save(xf, x)
        out = os.path.join(self.tmp, "out")
        shutil.rmtree(out, ignore_errors=True)
        r = mcpctl("run", model, out, "input=" + xf)
        self.assertEqual(r.returncode, 0, r.stderr)
        return np.load(os.path.join(out, "label.npy")).reshape(-1)

    def test_digits_accuracy_within_half_a_point(self):
        x_train, x_test, y_test = digits_split()
        calib = os.path.join(self.tmp, "calibration")
        os.mkdir(calib)
        for i, part in enumerate(np.array_split(x_train, 4)):
            np.save(os.path.join(calib, f"train{i}.npy"), part)
        q = os.path.join(self.tmp, "digits_int8.onnx")
        r = mcpctl("quantize", DIGITS, "--calibration", calib, "-o", q)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("activations (uint8)", r.stdout)
        self.assertIn("probabilities: max |int8 - fp32|", r.stdout)
        self.assertRegex(r.stdout, r"argmax agrees on \d+ of 1347 rows")
        # A QDQ model: QuantizeLinear / DequantizeLinear pairs and int8 weights.
        r = mcpctl("inspect", q)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("QuantizeLinear", r.stdout)
        self.assertIn("DequantizeLinear", r.stdout)
        fp32 = float(np.mean(self.labels(DIGITS, x_test) == y_test))
        int8 = float(np.mean(self.labels(q, x_test) == y_test))
        self.assertGreater(fp32, 0.9)
        self.assertLessEqual(fp32 - int8, 0.005, f"fp32 accuracy {fp32:.4f}, int8 {int8:.4f}")

    def test_refusals_name_what_is_wrong(self):
        calib = os.path.join(self.tmp, "calibration")
        os.mkdir(calib)
        out = os.path.join(self.tmp, "q.onnx")
        # No calibration folder given.
        r = mcpctl("quantize", DIGITS, "-o", out)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--calibration DIR", r.stderr)
        # An empty one.
        r = mcpctl("quantize", DIGITS, "--calibration", calib, "-o", out)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no .npy samples", r.stderr)
        self.assertIn(calib, r.stderr)
        # A missing one.
        r = mcpctl("quantize", DIGITS, "--calibration", os.path.join(self.tmp, "nope"), "-o", out)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot read the calibration folder", r.stderr)
        # A sample of the wrong width: the model refuses it, by sample.
        np.save(os.path.join(calib, "a.npy"), np.zeros((2, 63), np.float32))
        r = mcpctl("quantize", DIGITS, "--calibration", calib, "-o", out)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("calibration sample 0", r.stderr)
        self.assertFalse(os.path.exists(out))
        # A file that is not .npy.
        os.remove(os.path.join(calib, "a.npy"))
        with open(os.path.join(calib, "b.npy"), "wb") as f:
            f.write(b"not numpy")
        r = mcpctl("quantize", DIGITS, "--calibration", calib, "-o", out)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("b.npy", r.stderr)
        # A model that is not one.
        bad = os.path.join(self.tmp, "bad.onnx")
        with open(bad, "wb") as f:
            f.write(b"\xff\xff\xff\x01")
        np.save(os.path.join(calib, "b.npy"), np.zeros((1, 64), np.float32))
        r = mcpctl("quantize", bad, "--calibration", calib, "-o", out)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("bad.onnx", r.stderr)
        # An output that cannot be written.
        r = mcpctl("quantize", DIGITS, "--calibration", calib, "-o", os.path.join(self.tmp, "no", "such", "q.onnx"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot write", r.stderr)


def setUpModule():
    ts.setUpModule()


def tearDownModule():
    ts.tearDownModule()


class PrecisionTests(ts.ServerTestCase):
    """precision: int8 applied at load, through the server."""

    ROOT = None

    @classmethod
    def server_args(cls):
        cls.ROOT = tempfile.mkdtemp(prefix="mcp-e2e-precision-")
        shutil.copy(DIGITS, os.path.join(cls.ROOT, "digits.onnx"))
        x_train, cls.x_test, cls.y_test = digits_split()
        os.mkdir(os.path.join(cls.ROOT, "calib"))
        for i, part in enumerate(np.array_split(x_train, 4)):
            np.save(os.path.join(cls.ROOT, "calib", f"train{i}.npy"), part)
        # A folder inside the root whose only sample is a link to a file
        # outside it: the link is not followed.
        cls.OUTSIDE = tempfile.mkdtemp(prefix="mcp-e2e-outside-")
        np.save(os.path.join(cls.OUTSIDE, "secret.npy"), x_train[:4])
        os.mkdir(os.path.join(cls.ROOT, "linked"))
        os.symlink(os.path.join(cls.OUTSIDE, "secret.npy"), os.path.join(cls.ROOT, "linked", "a.npy"))
        return ["--model-root", cls.ROOT]

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.ROOT, ignore_errors=True)
        shutil.rmtree(cls.OUTSIDE, ignore_errors=True)

    def apply(self, name, extra):
        text = f"name: {name}\nformat: onnx\npath: digits.onnx\nmax_batch_size: 512\n{extra}"
        return ts.http(self.server, "POST", f"/v2/repository/models/{name}/load",
                       json_body={"parameters": {"config": text}})

    def labels(self, name):
        body, headers = ts.v2_request([("input", "FP32", self.x_test, True)])
        _, out = ts.parse_v2_response(self, ts.http(self.server, "POST", f"/v2/models/{name}/infer", body=body,
                                                    headers=headers))
        return np.asarray(out["label"]).reshape(-1)

    def test_static_and_dynamic_int8(self):
        for name, extra, kind in (("d_static", "precision: int8\ncalibration: calib\n", "static"),
                                  ("d_dynamic", "precision: int8\n", "dynamic"),
                                  ("d_fp32", "", None)):
            with self.subTest(model=name):
                r = self.apply(name, extra)
                self.assertEqual(r.status_code, 200, r.text)
                desc = ts.http(self.server, "GET", f"/v2/repository/models/{name}").json()["descriptor"]
                self.assertEqual(desc["precision"], "int8" if kind else "fp32")
                self.assertEqual(desc.get("quantization"), kind)
        fp32 = float(np.mean(self.labels("d_fp32") == self.y_test))
        for name in ("d_static", "d_dynamic"):
            acc = float(np.mean(self.labels(name) == self.y_test))
            self.assertLessEqual(fp32 - acc, 0.005, f"{name}: fp32 {fp32:.4f}, int8 {acc:.4f}")

    def test_bf16(self):
        # bf16 applies where the CPU has bf16 dot products; elsewhere the
        # model runs fp32 and says so. Either way accuracy holds.
        cpu = open("/proc/cpuinfo").read()
        want = "bf16" if ("avx512_bf16" in cpu or "amx_bf16" in cpu) else "fp32"
        for name, extra in (("d_bf16", "precision: bf16\n"), ("d_ref32", "")):
            r = self.apply(name, extra)
            self.assertEqual(r.status_code, 200, r.text)
        info = ts.http(self.server, "GET", "/v2/repository/models/d_bf16").json()
        self.assertEqual(info["descriptor"]["precision"], "bf16")
        self.assertEqual(info["precision"], want)
        if want == "fp32":
            self.assertIn("precision bf16 runs as fp32", json.dumps(info))
        self.assertEqual(ts.http(self.server, "GET", "/v2/repository/models/d_ref32").json()["precision"], "fp32")
        fp32 = float(np.mean(self.labels("d_ref32") == self.y_test))
        acc = float(np.mean(self.labels("d_bf16") == self.y_test))
        self.assertLessEqual(abs(fp32 - acc), 0.005, f"fp32 {fp32:.4f}, bf16 {acc:.4f}")

    def test_refusals(self):
        for extra, want, status in (
                ("precision: int8\ncalibration: ../../etc\n", "calibration", 400),
                ("calibration: calib\n", "need precision: int8", 400),
                ("precision: fp16\n", "precision 'fp16' is not implemented", 400),
                ("precision: int8\ncalibration: digits.onnx\n", "cannot read the calibration folder", None),
                ("precision: int8\ncalibration: linked\n", "no .npy samples", None)):
            with self.subTest(extra=extra):
                r = self.apply("d_bad", extra)
                self.assertNotEqual(r.status_code, 200, r.text)
                if status:
                    self.assertEqual(r.status_code, status, r.text)
                self.assertIn(want, r.text)
                # Nothing of the host's layout leaks out of the model root.
                self.assertNotIn("/etc", r.text.replace("../../etc", ""))
                self.assertNotIn(self.OUTSIDE, r.text)
        self.assertIsNone(self.server.proc.poll())


if __name__ == "__main__":
    unittest.main()
