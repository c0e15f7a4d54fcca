"""Generative models (format gguf) in the server: loading from a bare
.gguf file and from descriptors with a generation section, their metadata,
and the errors of the tensor APIs and of bad generation settings.

Run by ctest (tests/e2e/CMakeLists.txt), one entry per class."""
import os
import shutil
import unittest

import test_server as ts

FORTUNES = os.path.join(ts.DEMO_DIR, "fortunes.gguf")


def setUpModule():
    ts.setUpModule()


def tearDownModule():
    ts.tearDownModule()


class GgufLoadTests(ts.TempModelsTestCase):
    def setUp(self):
        super().setUp()
        self.gguf = os.path.join(self.models, "fortunes.gguf")
        shutil.copy(FORTUNES, self.gguf)

    def test_model_path_gguf_is_generative(self):
        srv = self.start("--model-path", self.gguf)
        r = ts.http(srv, "GET", "/v2/models/fortunes")
        self.assertEqual(r.status_code, 200, r.text)
        meta = r.json()
        self.assertEqual(meta["platform"], "gguf")
        self.assertEqual(meta["inputs"], [{"name": "text_input", "datatype": "BYTES", "shape": [1]}])
        self.assertEqual(meta["outputs"], [{"name": "text_output", "datatype": "BYTES", "shape": [1]}])
        r = ts.http(srv, "GET", "/v2/repository/models/fortunes")
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(r.json()["format"], "gguf")
        # The tensor API says where text goes, and does not crash on it.
        r = ts.http(srv, "POST", "/v2/models/fortunes/infer",
                    json_body={"inputs": [{"name": "text_input", "shape": [1], "datatype": "BYTES", "data": ["hi"]}]})
        self.assertEqual(r.status_code, 400, r.text)
        self.assertIn("/v2/models/fortunes/generate", r.json()["error"])

    def test_gguf_found_by_magic_not_name(self):
        renamed = os.path.join(self.models, "weights.bin")
        shutil.copy(FORTUNES, renamed)
        srv = self.start("--model-path", renamed)
        r = ts.http(srv, "GET", "/v2/models/weights")
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(r.json()["platform"], "gguf")

    def test_descriptor_with_generation_section(self):
        srv = self.start("--model-root", self.models)
        text = ("name: chat\nversion: v1.2.0\nformat: gguf\npath: %s\ninstances: {threads: 1}\n"
                "generation: {max_sequences: 4, step_tokens: 64, max_tokens: 32, chat_template: plain}\n" % self.gguf)
        r = self.apply(srv, "chat", text)
        self.assertEqual(r.status_code, 200, r.text)
        r = ts.http(srv, "GET", "/v2/repository/models/chat")
        self.assertEqual(r.status_code, 200, r.text)
        d = r.json()
        self.assertEqual((d["version"], d["format"], d["state"]), ("v1.2.0", "gguf", "READY"))

    def test_bad_generation_settings_name_the_field(self):
        srv = self.start("--model-root", self.models)
        text = "name: chat\nformat: gguf\npath: %s\ngeneration: {max_sequences: 100000, cache_type: q8}\n" % self.gguf
        r = self.apply(srv, "chat", text)
        self.assertEqual(r.status_code, 400, r.text)
        err = r.json()["error"]
        self.assertIn("generation.max_sequences", err)
        self.assertIn("generation.cache_type", err)
        # Tensor settings do not apply to a generative model.
        text = "name: chat\nformat: gguf\npath: %s\nmax_batch_size: 8\n" % self.gguf
        r = self.apply(srv, "chat", text)
        self.assertEqual(r.status_code, 400, r.text)
        self.assertIn("max_batch_size", r.json()["error"])

    def test_gguf_outside_the_roots_is_refused(self):
        srv = self.start("--model-root", self.models)
        text = "name: chat\nformat: gguf\npath: %s\n" % FORTUNES
        r = self.apply(srv, "chat", text)
        self.assertEqual(r.status_code, 400, r.text)
        self.assertNotIn(ts.DEMO_DIR, r.json()["error"].replace(FORTUNES, "<path>"))

    def test_corrupt_gguf_fails_with_reason(self):
        bad = os.path.join(self.models, "bad.gguf")
        with open(FORTUNES, "rb") as f:
            data = bytearray(f.read())
        with open(bad, "wb") as f:
            f.write(bytes(data[:4096]))  # truncated: tensors point past the end
        srv = self.start("--model-root", self.models)
        r = self.apply(srv, "bad", "name: bad\nformat: gguf\npath: %s\n" % bad)
        self.assertIn(r.status_code, (400, 422, 500), r.text)
        self.assertIn("bad", r.json()["error"])
        r = ts.http(srv, "GET", "/v2/health/live")
        self.assertEqual(r.status_code, 200)


if __name__ == "__main__":
    unittest.main()
