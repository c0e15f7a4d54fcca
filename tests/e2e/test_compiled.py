"""Compiled models (format: mcpir) through a real server: a model compiled by
`mcpctl compile` answers exactly as its ONNX source; compiled for other
threads it loads from the ONNX it embeds and describe's load_note says so;
the store keeps it by digest and serves it after kill -9 with the file gone;
descriptors that mix up the formats, ask int8 of a compiled model, name a
damaged file or one outside the model roots are refused, naming the field
or the problem, and the server stays up.

Run by ctest (tests/e2e/CMakeLists.txt), one entry per class."""
import os
import subprocess
import unittest

import test_server as ts


def setUpModule():
    ts.setUpModule()


def tearDownModule():
    ts.tearDownModule()


def compile_model(src, out, *args):
    r = subprocess.run([ts.MCPCTL_BIN, "compile", src, "-o", out, *args], capture_output=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(r.stderr.decode())


class CompiledModelTests(ts.TempModelsTestCase):
    def setUp(self):
        super().setUp()
        self.ir = os.path.join(self.models, "digits.mcpir")
        compile_model(self.model, self.ir, "--threads", "1")
        self.store = os.path.join(self.tmp, "store")

    def descriptor(self, name, path, fmt="mcpir", extra=""):
        return f"name: {name}\nformat: {fmt}\npath: {path}\ninstances: {{count: 1, threads: 1}}\n{extra}"

    def outputs(self, srv, name):
        got = []
        for i in range(5):
            r = ts.http(srv, "POST", f"/v2/models/{name}/infer", json_body=ts.digits_v2_body(i))
            self.assertEqual(r.status_code, 200, r.text)
            got.append(sorted((o["name"], o["data"]) for o in r.json()["outputs"]))
        return got

    def test_serves_as_its_onnx_and_comes_back_from_the_store(self):
        srv = self.start("--model-root", self.models, "--store", self.store)
        self.assertEqual(self.apply(srv, "d_onnx", self.descriptor("d_onnx", self.model, "onnx")).status_code, 200)
        r = self.apply(srv, "d_ir", self.descriptor("d_ir", self.ir))
        self.assertEqual(r.status_code, 200, r.text)
        info = ts.http(srv, "GET", "/v2/repository/models/d_ir").json()
        self.assertEqual(info["format"], "mcpir")
        self.assertNotIn("load_note", info)
        want = self.outputs(srv, "d_onnx")
        self.assertEqual(self.outputs(srv, "d_ir"), want, "bit for bit the ONNX model's answers")
        # Stored by digest: after kill -9, with the compiled file gone, the
        # version comes back from the store and answers the same.
        srv.kill()
        self.servers.remove(srv)
        os.unlink(self.ir)
        srv = self.start("--model-root", self.models, "--store", self.store)
        self.assertIn("d_ir:", srv.stderr_text())
        self.assertEqual(ts.http(srv, "GET", "/v2/models/d_ir/ready").status_code, 200)
        self.assertEqual(self.outputs(srv, "d_ir"), want)

    def test_other_threads_load_the_embedded_onnx(self):
        srv = self.start("--model-root", self.models)
        text = f"name: d2\nformat: mcpir\npath: {self.ir}\ninstances: {{count: 1, threads: 2}}\n"
        r = self.apply(srv, "d2", text)
        self.assertEqual(r.status_code, 200, r.text)
        info = ts.http(srv, "GET", "/v2/repository/models/d2").json()
        self.assertIn("threads 1", info.get("load_note", ""))
        self.assertIn("recompiled from the embedded ONNX", info["load_note"])
        self.assertNotIn(self.models, info["load_note"])
        self.assertEqual(self.apply(srv, "d_onnx", self.descriptor("d_onnx", self.model, "onnx")).status_code, 200)
        self.assertEqual([sorted(o)[0] for o in self.outputs(srv, "d2")],
                         [sorted(o)[0] for o in self.outputs(srv, "d_onnx")])

    def test_refusals(self):
        outside = os.path.join(self.tmp, "outside.mcpir")
        compile_model(self.model, outside, "--threads", "1")
        damaged = os.path.join(self.models, "damaged.mcpir")
        with open(self.ir, "rb") as f, open(damaged, "wb") as g:
            g.write(f.read()[:700])
        srv = self.start("--model-root", self.models)
        for name, text, want in (
                ("a", self.descriptor("a", self.model), "format mcpir needs a compiled model"),
                ("b", self.descriptor("b", self.ir, "onnx"), "set format: mcpir"),
                ("c", self.descriptor("c", self.ir, extra="precision: int8\n"), "quantize first"),
                ("d", self.descriptor("d", damaged), "lies outside the"),
                ("e", self.descriptor("e", outside), "path")):
            with self.subTest(name=name):
                r = self.apply(srv, name, text)
                self.assertNotEqual(r.status_code, 200, r.text)
                self.assertIn(want, r.text)
                # No host path but the ones the request named.
                self.assertNotIn(self.tmp, r.text.replace(self.models, "").replace(outside, ""))
        self.assertIsNone(srv.proc.poll())
        self.assertEqual(ts.http(srv, "GET", "/v2/health/live").status_code, 200)


if __name__ == "__main__":
    unittest.main()
