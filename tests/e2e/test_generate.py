"""Generative models (format gguf) in the server: loading from a bare
.gguf file and from descriptors with a generation section, their metadata,
and the errors of the tensor APIs and of bad generation settings.

Run by ctest (tests/e2e/CMakeLists.txt), one entry per class."""
import concurrent.futures
import json
import os
import random
import shutil
import socket
import subprocess
import time
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
        text = ("name: chat\nformat: gguf\npath: %s\ngeneration: {max_sequences: 100000, cache_type: q8, "
                "prefix_cache: sometimes}\n" % self.gguf)
        r = self.apply(srv, "chat", text)
        self.assertEqual(r.status_code, 400, r.text)
        err = r.json()["error"]
        self.assertIn("generation.max_sequences", err)
        self.assertIn("generation.cache_type", err)
        self.assertIn("generation.prefix_cache", err)
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



def greedy_cli(prompt, max_tokens, special=True):
    """The runtime's own greedy answer (mcpctl generate, no server);
    special=False reads special-token text as plain text."""
    out = subprocess.run([ts.MCPCTL_BIN, "generate", FORTUNES, "--prompt", prompt, "--max-tokens", str(max_tokens),
                          "--temperature", "0", "--json"] + ([] if special else ["--no-special"]),
                         capture_output=True, timeout=120, check=True)
    return json.loads(out.stdout)


def sse_texts(raw):
    """The text_output pieces of an SSE body, and any error events."""
    texts, errors = [], []
    for block in raw.decode("utf-8").split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        ev = json.loads(block[len("data: "):])
        if "error" in ev:
            errors.append(ev["error"])
        else:
            texts.append(ev["text_output"])
    return texts, errors


PROMPTS = ["The ", "A man ", "Life is ", "You will ", "Never ", "What ", "If you ", "There is ", "Love ",
           "Work ", "Why ", "Time ", "All ", "It is ", "When ", "Nothing ", "People "]


class GenerateTests(ts.ServerTestCase):
    @classmethod
    def server_args(cls):
        return ["--model-path", FORTUNES]

    def generate(self, body, path="/v2/models/fortunes/generate", **kw):
        return self.call("POST", path, json_body=body, **kw)

    def test_greedy_matches_the_runtime(self):
        for prompt in PROMPTS[:3]:
            with self.subTest(prompt=prompt):
                r = self.generate({"text_input": prompt, "max_tokens": 48, "temperature": 0})
                self.assertEqual(r.status_code, 200, r.text)
                d = r.json()
                ref = greedy_cli(prompt, 48)
                self.assertEqual(d["text_output"], ref["text"])
                self.assertEqual(d["finish_reason"], ref["finish_reason"])
                self.assertEqual(d["prompt_tokens"], ref["prompt_tokens"])
                self.assertEqual((d["model_name"], d["model_version"]), ("fortunes", "v1.0.0"))
                self.assertIn(d["finish_reason"], ("stop", "length"))
                self.assertGreater(d["prompt_tokens"], 0)
                self.assertEqual(r.headers.get("Mcp-Model-Version"), "v1.0.0")

    def test_greedy_alone_equals_greedy_among_16_others(self):
        alone = {}
        for p in PROMPTS:
            r = self.generate({"text_input": p, "max_tokens": 40})
            self.assertEqual(r.status_code, 200, r.text)
            alone[p] = r.json()["text_output"]
        with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool:
            together = list(pool.map(lambda p: self.generate({"text_input": p, "max_tokens": 40}), PROMPTS))
        for p, r in zip(PROMPTS, together):
            self.assertEqual(r.status_code, 200, r.text)
            self.assertEqual(r.json()["text_output"], alone[p], f"prompt {p!r} differs when batched")

    def test_stream_with_curl(self):
        body = json.dumps({"text_input": "The ", "max_tokens": 32})
        out = subprocess.run(["curl", "-sS", "-N", "--fail-with-body", "-H", "Content-Type: application/json",
                              "-d", body, self.server.url + "/v2/models/fortunes/generate_stream"],
                             capture_output=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        texts, errors = sse_texts(out.stdout)
        self.assertEqual(errors, [])
        self.assertGreater(len(texts), 5, "the text should come in many events")
        r = self.generate({"text_input": "The ", "max_tokens": 32})
        self.assertEqual("".join(texts), r.json()["text_output"])
        # curl sees the event-stream type
        head = subprocess.run(["curl", "-sS", "-N", "-o", "/dev/null", "-w", "%{content_type}", "-d", body,
                               self.server.url + "/v2/models/fortunes/generate_stream"], capture_output=True, timeout=120)
        self.assertEqual(head.stdout.decode(), "text/event-stream")

    def test_stop_strings_end_the_text(self):
        full = self.generate({"text_input": "The ", "max_tokens": 40}).json()["text_output"]
        cut = full.index(" the")
        r = self.generate({"text_input": "The ", "max_tokens": 40, "stop": [" the", "zzzz"]})
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(r.json()["text_output"], full[:cut])
        self.assertEqual(r.json()["finish_reason"], "stop")
        r = self.generate({"text_input": "The ", "parameters": {"max_tokens": 3}})
        self.assertEqual(r.json()["completion_tokens"], 3)
        self.assertEqual(r.json()["finish_reason"], "length")

    def test_seeded_sampling_repeats(self):
        body = {"text_input": "The ", "max_tokens": 24, "temperature": 1.0, "top_k": 40, "seed": 7}
        a = self.generate(body).json()["text_output"]
        b = self.generate(body).json()["text_output"]
        self.assertEqual(a, b)

    def test_bad_requests_name_the_field(self):
        cases = [
            ({"text_input": "x", "max_tokens": 0}, "max_tokens"),
            ({"text_input": "x", "max_tokens": 10 ** 12}, "max_tokens"),
            ({"text_input": "x", "max_tokens": "9"}, "max_tokens"),
            ({"text_input": "x", "temperature": -1}, "temperature"),
            ({"text_input": "x", "temperature": "hot"}, "temperature"),
            ({"text_input": "x", "top_p": 0}, "top_p"),
            ({"text_input": "x", "top_k": -3}, "top_k"),
            ({"text_input": "x", "seed": -1}, "seed"),
            ({"text_input": "x", "stop": ["a", "b", "c", "d", "e"]}, "stop"),
            ({"text_input": "x", "stop": ["x" * 200]}, "stop"),
            ({"text_input": "x", "stop": [""]}, "stop"),
            ({"text_input": "x", "stop": 5}, "stop"),
            ({"text_input": "x", "n_threads": 64}, "n_threads"),
            ({"text_input": "x", "priority": -1}, "priority"),
            ({"text_input": "x", "timeout": 0}, "timeout"),
            ({"text_input": "x", "ignore_eos": 1}, "ignore_eos"),
            ({"text_input": "x", "parameters": []}, "parameters"),
            ({"text_input": 5}, "text_input"),
            ({"prompt": "x"}, "prompt"),
            ({}, "text_input"),
        ]
        for body, field in cases:
            with self.subTest(body=body):
                r = self.generate(body)
                self.assertEqual(r.status_code, 400, r.text)
                self.assertIn(field, r.json()["error"])
        r = self.call("POST", "/v2/models/fortunes/generate", body=b'{"text_input": "x",', headers={"Content-Type": "application/json"})
        self.assertEqual(r.status_code, 400, r.text)
        self.assertIn("line 1", r.json()["error"])
        r = self.generate({"text_input": "x"}, path="/v2/models/nosuch/generate")
        self.assertEqual(r.status_code, 404, r.text)
        r = self.generate({"text_input": "x"}, path="/v2/models/fortunes/versions/v9.9.9/generate")
        self.assertEqual(r.status_code, 404, r.text)

    def test_deadline_and_priority(self):
        # A timeout of 1 us has passed by the first step: 504, naming the deadline.
        r = self.generate({"text_input": "The ", "max_tokens": 40, "timeout": 1})
        self.assertEqual(r.status_code, 504, r.text)
        self.assertIn("deadline", r.json()["error"])
        r = self.post_openai({"model": "fortunes", "prompt": "The ", "max_tokens": 4, "timeout": 1})
        self.assertEqual(r.status_code, 504, r.text)
        r = self.generate({"text_input": "The ", "max_tokens": 4, "timeout": 60000000, "priority": 3})
        self.assertEqual(r.status_code, 200, r.text)

    def post_openai(self, body):
        return self.call("POST", "/v1/completions", json_body=body)

    def test_prompt_longer_than_the_context(self):
        r = self.generate({"text_input": "the way of the world " * 3000, "max_tokens": 4})
        self.assertEqual(r.status_code, 400, r.text)
        self.assertIn("context", r.json()["error"])
        r = self.generate({"text_input": "", "max_tokens": 4})
        self.assertIn(r.status_code, (200, 400), r.text)
        r = self.generate({"text_input": "The ", "max_tokens": 4})
        self.assertEqual(r.status_code, 200, r.text)


NODE_CLIENTS = os.environ.get("MCP_NODE_CLIENTS_DIR", os.path.join(ts.SOURCE_DIR, ".cache", "node"))
OPENAI_CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node", "openai_client.mjs")


def sse_data(raw):
    """The data lines of an SSE body, in order (JSON decoded but for [DONE])."""
    out = []
    for block in raw.decode("utf-8").split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        data = block[len("data: "):]
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


class OpenAITests(ts.ServerTestCase):
    """POST /v1/completions and /v1/chat/completions, GET /v1/models, with
    the OpenAI Node SDK and curl."""

    @classmethod
    def server_args(cls):
        return ["--model-path", FORTUNES]

    def node(self, plan):
        self.assertTrue(os.path.isdir(os.path.join(NODE_CLIENTS, "node_modules", "openai")),
                        "the OpenAI SDK is missing: run tools/fetch-node-clients.sh (make fetch)")
        out = subprocess.run(["node", OPENAI_CLIENT, self.server.url, json.dumps(plan)], capture_output=True,
                             timeout=300, env=dict(os.environ, MCP_NODE_CLIENTS_DIR=NODE_CLIENTS))
        self.assertEqual(out.returncode, 0, out.stderr.decode())
        return json.loads(out.stdout)

    def post(self, path, body, **kw):
        return self.call("POST", path, json_body=body, **kw)

    def test_sdk_completions_and_chat_equal_the_runtime(self):
        prompt = "Life is "
        ref = greedy_cli(prompt, 32)
        chat_prompt = "user: Life is\nassistant:"  # the plain template of a model without one
        chat_ref = greedy_cli(chat_prompt, 24)
        msgs = [{"role": "user", "content": "Life is"}]
        plan = [
            {"kind": "completion", "params": {"model": "fortunes", "prompt": prompt, "max_tokens": 32, "temperature": 0}},
            {"kind": "completion", "stream": True,
             "params": {"model": "fortunes", "prompt": prompt, "max_tokens": 32, "temperature": 0,
                        "stream_options": {"include_usage": True}}},
            {"kind": "chat", "params": {"model": "fortunes", "messages": msgs, "max_tokens": 24, "temperature": 0}},
            {"kind": "chat", "stream": True,
             "params": {"model": "fortunes", "messages": msgs, "max_tokens": 24, "temperature": 0,
                        "stream_options": {"include_usage": True}}},
            {"kind": "models"},
        ]
        comp, comp_s, chat, chat_s, models = self.node(plan)
        for r in (comp, comp_s):
            self.assertNotIn("error", r)
            self.assertEqual(r["texts"], [ref["text"]])
            self.assertEqual(r["finish"], [ref["finish_reason"]])
            self.assertEqual(r["usage"]["prompt_tokens"], ref["prompt_tokens"])
            self.assertEqual(r["usage"]["total_tokens"], r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"])
        self.assertEqual(comp["object"], "text_completion")
        self.assertGreater(comp_s["chunks"], 5)
        for r in (chat, chat_s):
            self.assertNotIn("error", r)
            self.assertEqual(r["texts"], [chat_ref["text"]])
            self.assertEqual(r["usage"]["prompt_tokens"], chat_ref["prompt_tokens"])
        self.assertEqual(chat["object"], "chat.completion")
        self.assertEqual(chat_s["roles"], 1)
        self.assertEqual(models["ids"], ["fortunes"])

    def test_sdk_errors(self):
        plan = [
            {"kind": "completion", "params": {"model": "nosuch", "prompt": "x"}},
            {"kind": "completion", "params": {"model": "fortunes", "prompt": "x", "max_tokens": 0}},
            {"kind": "chat", "params": {"model": "fortunes", "messages": [{"role": "wizard", "content": "x"}]}},
            {"kind": "chat", "stream": True, "params": {"model": "fortunes", "messages": []}},
        ]
        missing, zero, role, empty = self.node(plan)
        self.assertEqual(missing["error"]["status"], 404)
        self.assertIn("nosuch", missing["error"]["message"])
        self.assertEqual(missing["error"]["param"], "model")
        self.assertEqual(zero["error"]["status"], 400)
        self.assertEqual(zero["error"]["param"], "max_tokens")
        self.assertEqual(zero["error"]["type"], "invalid_request_error")
        self.assertEqual(role["error"]["param"], "messages[0].role")
        self.assertEqual(empty["error"]["status"], 400)

    def test_curl_stream_chunks_end_with_done(self):
        body = json.dumps({"model": "fortunes", "prompt": "The ", "max_tokens": 16, "stream": True, "n": 2,
                           "temperature": 0, "stream_options": {"include_usage": True}})
        out = subprocess.run(["curl", "-sS", "-N", "--fail-with-body", "-H", "Content-Type: application/json",
                              "-d", body, self.server.url + "/v1/completions"], capture_output=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        events = sse_data(out.stdout)
        self.assertEqual(events[-1], "[DONE]")
        usage = events[-2]
        self.assertEqual(usage["choices"], [])
        chunks = events[:-2]
        ids = {c["id"] for c in chunks + [usage]}
        self.assertEqual(len(ids), 1, "one id for every chunk")
        texts = ["", ""]
        for c in chunks:
            self.assertEqual(c["object"], "text_completion")
            self.assertIsNone(c["usage"])
            for ch in c["choices"]:
                texts[ch["index"]] += ch["text"]
        whole = self.post("/v1/completions", {"model": "fortunes", "prompt": "The ", "max_tokens": 16,
                                              "temperature": 0}).json()
        self.assertEqual(texts, [whole["choices"][0]["text"]] * 2)
        self.assertEqual(usage["usage"]["completion_tokens"], 2 * whole["usage"]["completion_tokens"])
        self.assertEqual(usage["usage"]["prompt_tokens"], whole["usage"]["prompt_tokens"])

    def test_n_seed_stop_and_logprobs(self):
        body = {"model": "fortunes", "prompt": "The ", "max_tokens": 20, "temperature": 1.0, "n": 3, "seed": 11}
        a = self.post("/v1/completions", body).json()
        b = self.post("/v1/completions", body).json()
        self.assertEqual([c["text"] for c in a["choices"]], [c["text"] for c in b["choices"]])
        self.assertEqual([c["index"] for c in a["choices"]], [0, 1, 2])
        self.assertGreater(len({c["text"] for c in a["choices"]}), 1, "choices sample apart")
        # Several prompts: choices in prompt order, n each.
        r = self.post("/v1/completions", {"model": "fortunes", "prompt": ["The ", "Life is "], "max_tokens": 8,
                                          "temperature": 0, "n": 2}).json()
        self.assertEqual(len(r["choices"]), 4)
        self.assertEqual(r["choices"][0]["text"], r["choices"][1]["text"])
        self.assertEqual(r["choices"][2]["text"], greedy_cli("Life is ", 8)["text"])
        full = self.post("/v1/completions", {"model": "fortunes", "prompt": "The ", "max_tokens": 40,
                                             "temperature": 0}).json()["choices"][0]["text"]
        cut = full.index(" the")
        r = self.post("/v1/completions", {"model": "fortunes", "prompt": "The ", "max_tokens": 40, "temperature": 0,
                                          "stop": " the"}).json()
        self.assertEqual(r["choices"][0]["text"], full[:cut])
        self.assertEqual(r["choices"][0]["finish_reason"], "stop")
        # logprobs: the chosen token first among its alternatives (greedy), sorted, at most the number asked.
        r = self.post("/v1/completions", {"model": "fortunes", "prompt": "The ", "max_tokens": 6, "temperature": 0,
                                          "logprobs": 3}).json()
        lp = r["choices"][0]["logprobs"]
        self.assertEqual(len(lp["tokens"]), 6)
        self.assertEqual("".join(lp["tokens"]), r["choices"][0]["text"])
        self.assertEqual(lp["text_offset"][0], 0)
        for tok, val, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
            self.assertLessEqual(len(top), 3)
            self.assertLess(val, 0)
            self.assertAlmostEqual(max(top.values()), val, places=4)
        r = self.post("/v1/chat/completions", {"model": "fortunes", "messages": [{"role": "user", "content": "Hi"}],
                                               "max_tokens": 5, "temperature": 0, "logprobs": True,
                                               "top_logprobs": 2}).json()
        content = r["choices"][0]["logprobs"]["content"]
        self.assertEqual("".join(t["token"] for t in content), r["choices"][0]["message"]["content"])
        for t in content:
            self.assertEqual(bytes(t["bytes"]).decode("utf-8", "replace"), t["token"])
            self.assertLessEqual(len(t["top_logprobs"]), 2)

    def test_messages_cannot_forge_special_tokens(self):
        # <|endoftext|> is a control token of the model: a raw completion
        # prompt may write it, a chat message's text may not.
        marker = "<|endoftext|>"
        raw = self.post("/v1/completions", {"model": "fortunes", "prompt": "user: " + marker + "\nassistant:",
                                            "max_tokens": 1}).json()
        chat = self.post("/v1/chat/completions", {"model": "fortunes", "max_tokens": 1,
                                                  "messages": [{"role": "user", "content": marker}]}).json()
        ref = greedy_cli("user: " + marker + "\nassistant:", 1, special=False)
        self.assertLess(raw["usage"]["prompt_tokens"], chat["usage"]["prompt_tokens"])
        self.assertEqual(chat["usage"]["prompt_tokens"], ref["prompt_tokens"])
        # Text parts join like one string.
        parts = self.post("/v1/chat/completions", {"model": "fortunes", "max_tokens": 8, "temperature": 0,
                                                   "messages": [{"role": "user", "content": [
                                                       {"type": "text", "text": "Life"}, {"type": "text", "text": "is"}]}]})
        one = self.post("/v1/chat/completions", {"model": "fortunes", "max_tokens": 8, "temperature": 0,
                                                 "messages": [{"role": "user", "content": "Life\nis"}]})
        self.assertEqual(parts.json()["choices"], one.json()["choices"])

    def test_bad_requests_in_openai_shape(self):
        msgs = [{"role": "user", "content": "x"}]
        cases = [
            ("/v1/completions", {"prompt": "x"}, "model"),
            ("/v1/completions", {"model": 5, "prompt": "x"}, "model"),
            ("/v1/completions", {"model": "fortunes"}, "prompt"),
            ("/v1/completions", {"model": "fortunes", "prompt": [1, 2, 3]}, "prompt[0]"),
            ("/v1/completions", {"model": "fortunes", "prompt": "x", "n": 17}, "n"),
            ("/v1/completions", {"model": "fortunes", "prompt": ["x"] * 9, "n": 2}, "n"),
            ("/v1/completions", {"model": "fortunes", "prompt": "x", "echo": True}, "echo"),
            ("/v1/completions", {"model": "fortunes", "prompt": "x", "logprobs": 21}, "logprobs"),
            ("/v1/completions", {"model": "fortunes", "prompt": "x", "logit_bias": {"5": 100}}, "logit_bias"),
            ("/v1/completions", {"model": "fortunes", "prompt": "x", "temperature": 9}, "temperature"),
            ("/v1/completions", {"model": "fortunes", "prompt": "x", "max_tokens": 10 ** 9}, "max_tokens"),
            ("/v1/completions", {"model": "fortunes", "prompt": "x", "stream": "yes"}, "stream"),
            ("/v1/completions", {"model": "fortunes", "prompt": "x", "bogus": 1}, "bogus"),
            ("/v1/chat/completions", {"model": "fortunes", "messages": "hi"}, "messages"),
            ("/v1/chat/completions", {"model": "fortunes", "messages": [{"role": "user"}] * 1025}, "messages"),
            ("/v1/chat/completions", {"model": "fortunes", "messages": [5]}, "messages[0]"),
            ("/v1/chat/completions", {"model": "fortunes", "messages": [{"role": "user", "content": 5}]},
             "messages[0].content"),
            ("/v1/chat/completions", {"model": "fortunes", "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}]}]}, "messages[0].content[0].type"),
            ("/v1/chat/completions", {"model": "fortunes", "messages": msgs, "tools": [{"type": "function"}]}, "tools"),
            ("/v1/chat/completions", {"model": "fortunes", "messages": msgs, "top_logprobs": 3}, "top_logprobs"),
            ("/v1/chat/completions", {"model": "fortunes", "messages": msgs,
                                      "response_format": {"type": "json_object"}}, "response_format"),
        ]
        for path, body, param in cases:
            with self.subTest(body=str(body)[:80]):
                r = self.post(path, body)
                self.assertEqual(r.status_code, 400, r.text)
                err = r.json()["error"]
                self.assertEqual(err["param"], param, err)
                self.assertEqual(err["type"], "invalid_request_error")
                self.assertTrue(err["message"])
        r = self.call("POST", "/v1/completions", body=b'{"model": "fortunes",', headers={"Content-Type": "application/json"})
        self.assertEqual(r.status_code, 400, r.text)
        self.assertIn("line 1", r.json()["error"]["message"])
        r = self.post("/v1/completions", {"model": "nosuch", "prompt": "x"})
        self.assertEqual((r.status_code, r.json()["error"]["code"]), (404, "model_not_found"))
        r = self.post("/v1/completions", {"model": "fortunes", "prompt": "the way " * 3000, "max_tokens": 2})
        self.assertEqual(r.status_code, 400, r.text)
        self.assertIn("context", r.json()["error"]["message"])
        # null means "not set", as the SDKs send it
        r = self.post("/v1/completions", {"model": "fortunes", "prompt": "x", "max_tokens": 2, "temperature": None,
                                          "stop": None, "logprobs": None, "user": "u1"})
        self.assertEqual(r.status_code, 200, r.text)

    def test_mcpctl_generate_and_bench_against_the_server(self):
        out = subprocess.run([ts.MCPCTL_BIN, "generate", "--server", self.server.url, "fortunes", "--prompt", "Life is ",
                              "--max-tokens", "24", "--greedy", "--json"], capture_output=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        got = json.loads(out.stdout)
        ref = greedy_cli("Life is ", 24)
        self.assertEqual((got["text"], got["finish_reason"], got["prompt_tokens"], got["completion_tokens"]),
                         (ref["text"], ref["finish_reason"], ref["prompt_tokens"], ref["completion_tokens"]))
        # Streamed to stdout as it comes; the summary on stderr.
        out = subprocess.run([ts.MCPCTL_BIN, "--server", self.server.url, "generate", "fortunes", "--prompt", "Life is ",
                              "--max-tokens", "24", "--greedy"], capture_output=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.decode(), ref["text"] + "\n")
        self.assertIn("24 generated", out.stderr.decode())
        out = subprocess.run([ts.MCPCTL_BIN, "generate", "--server", self.server.url, "nosuch", "--prompt", "x"],
                             capture_output=True, timeout=60)
        self.assertEqual(out.returncode, 1)
        self.assertIn("unknown model 'nosuch'", out.stderr.decode())
        out = subprocess.run([ts.MCPCTL_BIN, "bench", "--generate", "fortunes", "--server", self.server.url,
                              "--concurrency", "1,3", "--rounds", "2", "--max-tokens", "12", "--json"],
                             capture_output=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stderr)
        levels = json.loads(out.stdout)["levels"]
        self.assertEqual([(lv["concurrency"], lv["requests"], lv["errors"]) for lv in levels], [(1, 2, 0), (3, 6, 0)])
        for lv in levels:
            self.assertGreater(lv["tokens"], 0)
            self.assertGreater(lv["tokens_per_s"], 0)
            self.assertLessEqual(lv["ttft_p50_ms"], lv["ttft_p99_ms"])
            self.assertLessEqual(lv["itl_p50_ms"], lv["itl_p99_ms"])

    def test_models_list_speaks_both_protocols(self):
        r = self.call("GET", "/v1/models")
        self.assertEqual(r.status_code, 200, r.text)
        d = r.json()
        self.assertEqual(d["models"], ["fortunes"])
        self.assertEqual(d["object"], "list")
        self.assertEqual([(m["id"], m["object"]) for m in d["data"]], [("fortunes", "model")])
        m = self.call("GET", "/v1/models/fortunes").json()
        self.assertEqual((m["id"], m["name"], m["ready"], m["object"]), ("fortunes", "fortunes", True, "model"))


def gen_stats(srv, model):
    r = ts.http(srv, "GET", "/v2/models/%s/stats" % model)
    assert r.status_code == 200, r.text
    return r.json()["model_stats"][0]["generation"]


LONG = ("Do not take life too seriously. You will never get out of it alive. The only way to have a friend is "
        "to be one. A man who has no imagination has no wings. ")


class PrefixCacheTests(ts.TempModelsTestCase):
    """Full KV blocks shared between requests of one tenant, never across
    tenants, keyed by the server."""

    def setUp(self):
        super().setUp()
        self.gguf = os.path.join(self.models, "fortunes.gguf")
        shutil.copy(FORTUNES, self.gguf)

    def serve(self, **gen):
        srv = self.start("--model-root", self.models)
        fields = ", ".join(f"{k}: {v}" for k, v in dict(dict(max_sequences=4), **gen).items())
        r = self.apply(srv, "chat", f"name: chat\nformat: gguf\npath: {self.gguf}\ninstances: {{threads: 1}}\n"
                                    f"generation: {{{fields}}}\n")
        self.assertEqual(r.status_code, 200, r.text)
        return srv

    def gen(self, srv, prompt, tenant=None, max_tokens=8, path="/v2/models/chat/generate"):
        headers = {"tenant": tenant} if tenant is not None else {}
        r = ts.http(srv, "POST", path, json_body={"text_input": prompt, "max_tokens": max_tokens}, headers=headers)
        self.assertEqual(r.status_code, 200, r.text)
        return r.json()

    def test_one_tenant_hits_two_tenants_share_nothing(self):
        srv = self.serve()
        # One token: the prompt's blocks are published all the same.
        self.gen(srv, LONG, tenant="carol", max_tokens=1)
        self.gen(srv, LONG, tenant="carol", max_tokens=1)
        sc = gen_stats(srv, "chat")
        self.assertEqual(sc["prefix_cache"]["hits"] * 2, sc["prefix_cache"]["queries"], sc)
        self.assertGreater(sc["prefix_cache"]["hits"], 0)
        first = self.gen(srv, LONG, tenant="alice")
        s0 = gen_stats(srv, "chat")
        s0["prefix_cache"]["queries"] -= sc["prefix_cache"]["queries"]
        s0["prefix_cache"]["hits"] -= sc["prefix_cache"]["hits"]
        self.assertGreaterEqual(s0["prefix_cache"]["queries"], 2)
        self.assertEqual(s0["prefix_cache"]["hits"], 0)
        self.assertGreater(s0["kv_cache"]["cached_blocks"], 2, "full blocks are published")
        again = self.gen(srv, LONG, tenant="alice")
        s1 = gen_stats(srv, "chat")
        s1["prefix_cache"]["queries"] -= sc["prefix_cache"]["queries"]
        s1["prefix_cache"]["hits"] -= sc["prefix_cache"]["hits"]
        q = s1["prefix_cache"]["queries"] - s0["prefix_cache"]["queries"]
        h = s1["prefix_cache"]["hits"] - s0["prefix_cache"]["hits"]
        self.assertGreater(h, 0)
        self.assertEqual(h, q, "every full block of the prompt but the last token's is reused")
        self.assertEqual(again["text_output"], first["text_output"], "a hit changes no token")
        print("\nprefix cache, one tenant: %d of %d prompt blocks reused (%d tokens not computed)"
              % (h, q, s1["prefix_cache"]["cached_prompt_tokens"]))
        # Another tenant with the very same prompt: no block shared.
        other = self.gen(srv, LONG, tenant="bob")
        s2 = gen_stats(srv, "chat")
        s2["prefix_cache"]["queries"] -= sc["prefix_cache"]["queries"]
        s2["prefix_cache"]["hits"] -= sc["prefix_cache"]["hits"]
        self.assertGreater(s2["prefix_cache"]["queries"], s1["prefix_cache"]["queries"])
        self.assertEqual(s2["prefix_cache"]["hits"], s1["prefix_cache"]["hits"], "tenants share no block")
        self.assertGreater(s2["kv_cache"]["cached_blocks"], s1["kv_cache"]["cached_blocks"],
                           "bob's blocks are his own copies")
        self.assertEqual(other["text_output"], first["text_output"])
        # The anonymous tenant is a tenant too, and through OpenAI's API the same.
        self.gen(srv, LONG)
        s3 = gen_stats(srv, "chat")
        s3["prefix_cache"]["hits"] -= sc["prefix_cache"]["hits"]
        self.assertEqual(s3["prefix_cache"]["hits"], s2["prefix_cache"]["hits"])
        r = ts.http(srv, "POST", "/v1/completions", headers={"tenant": "bob"},
                    json_body={"model": "chat", "prompt": LONG, "max_tokens": 4})
        self.assertEqual(r.status_code, 200, r.text)
        s4 = gen_stats(srv, "chat")
        s4["prefix_cache"]["hits"] -= sc["prefix_cache"]["hits"]
        self.assertGreater(s4["prefix_cache"]["hits"], s3["prefix_cache"]["hits"])
        # Idle: no block held, nothing running.
        self.assertEqual((s4["kv_cache"]["used_blocks"], s4["running"], s4["waiting"]), (0, 0, 0))

    def test_a_request_cannot_choose_the_salt(self):
        srv = self.serve()
        for path, body in (("/v2/models/chat/generate", {"text_input": LONG, "cache_salt": "alice"}),
                           ("/v2/models/chat/generate", {"text_input": LONG, "parameters": {"cache_salt": "x"}}),
                           ("/v1/completions", {"model": "chat", "prompt": LONG, "cache_salt": "alice"}),
                           ("/v1/chat/completions", {"model": "chat", "messages": [{"role": "user", "content": "x"}],
                                                     "salt": "alice"})):
            with self.subTest(path=path, body=list(body)):
                r = ts.http(srv, "POST", path, json_body=body)
                self.assertEqual(r.status_code, 400, r.text)
        for bad in ("a b", "x" * 129, "é", "a\tb", "../x;y"):
            with self.subTest(tenant=bad):
                r = ts.http(srv, "POST", "/v2/models/chat/generate", json_body={"text_input": "x"},
                            headers={"tenant": bad.encode("utf-8")})
                self.assertEqual(r.status_code, 400, r.text)
                self.assertIn("tenant", r.json()["error"])
        # Nothing was queued by the refused requests.
        s = gen_stats(srv, "chat")
        self.assertEqual((s["requests"], s["prefix_cache"]["queries"]), (0, 0))

    def test_cached_and_uncached_answers_agree(self):
        srv = self.serve()
        plain = self.serve(prefix_cache="false")
        prompts = [LONG + p for p in PROMPTS[:6]]
        for p in prompts:
            self.gen(srv, p, max_tokens=24)  # fills the cache
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            hit = list(pool.map(lambda p: self.gen(srv, p, max_tokens=24), prompts))
            ref = list(pool.map(lambda p: self.gen(plain, p, max_tokens=24), prompts))
        self.assertEqual([r["text_output"] for r in hit], [r["text_output"] for r in ref])
        self.assertGreater(gen_stats(srv, "chat")["prefix_cache"]["hits"], 0)
        off = gen_stats(plain, "chat")
        self.assertEqual((off["prefix_cache"]["queries"], off["kv_cache"]["cached_blocks"]), (0, 0))

    def test_small_budget_evicts_and_returns_to_zero(self):
        # 65536 bytes hold a few blocks: published prefixes are evicted,
        # least recently used first, as new requests need blocks.
        srv = self.serve(kv_cache_bytes=65536, step_tokens=32, context_length=256, max_sequences=8)
        prompts = ["%s the way of the world " % p * 3 for p in PROMPTS[:12]]
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            rs = list(pool.map(lambda p: ts.http(srv, "POST", "/v2/models/chat/generate", headers={"tenant": p[:3].strip()},
                                                 json_body={"text_input": p, "max_tokens": 40}), prompts))
        for r in rs:
            self.assertIn(r.status_code, (200, 400, 429, 503), r.text)
            if r.status_code != 200:
                self.assertTrue(r.json()["error"])
        self.assertTrue([r for r in rs if r.status_code == 200])
        s = gen_stats(srv, "chat")
        self.assertGreater(s["kv_cache"]["evictions"], 0)
        self.assertLessEqual(s["kv_cache"]["cached_blocks"], s["kv_cache"]["total_blocks"])
        self.assertEqual((s["kv_cache"]["used_blocks"], s["running"], s["waiting"]), (0, 0, 0))
        metrics = ts.http(srv, "GET", "/metrics").text
        self.assertIn('mcp_kv_cache_blocks{model="chat",version="v1.0.0",state="used"} 0', metrics)
        self.assertIn('mcp_kv_cache_evictions_total{model="chat",version="v1.0.0"} %d' % s["kv_cache"]["evictions"],
                      metrics)

    def test_generation_metrics(self):
        srv = self.serve()
        for t in ("a", "a", "b"):
            self.gen(srv, LONG, tenant=t, max_tokens=6)
        m = ts.http(srv, "GET", "/metrics").text
        lab = 'model="chat",version="v1.0.0"'
        s = gen_stats(srv, "chat")
        for line in (f"mcp_generation_time_to_first_token_seconds_count{{{lab}}} 3",
                     f"mcp_generation_request_duration_seconds_count{{{lab}}} 3",
                     f"mcp_generation_inter_token_latency_seconds_count{{{lab}}} 15",
                     f"mcp_generation_tokens_total{{{lab}}} {s['generated_tokens']}",
                     f"mcp_generation_prompt_tokens_total{{{lab}}} {s['prompt_tokens']}",
                     f'mcp_generation_sequences{{{lab},state="running"}} 0',
                     f"mcp_prefix_cache_hits_total{{{lab}}} {s['prefix_cache']['hits']}",
                     f"mcp_prefix_cache_queries_total{{{lab}}} {s['prefix_cache']['queries']}"):
            self.assertIn(line + "\n", m)
        self.assertEqual(s["generated_tokens"], 18)
        self.assertAlmostEqual(s["prefix_cache"]["hit_ratio"], s["prefix_cache"]["hits"] / s["prefix_cache"]["queries"],
                               places=5)
        self.assertGreater(s["prefix_cache"]["hits"], 0)


class GenerateLifecycleTests(ts.TempModelsTestCase):
    """Versions of a generative model: a new version takes new requests at
    once while the streams of the old one run to their end."""

    def setUp(self):
        super().setUp()
        self.gguf = os.path.join(self.models, "fortunes.gguf")
        shutil.copy(FORTUNES, self.gguf)

    def descriptor(self, version):
        return (f"name: chat\nversion: {version}\nformat: gguf\npath: {self.gguf}\ninstances: {{threads: 1}}\n"
                "generation: {max_sequences: 4, max_tokens: 200}\n")

    def test_hot_swap_lets_running_streams_finish(self):
        srv = self.start("--model-root", self.models)
        self.assertEqual(self.apply(srv, "chat", self.descriptor("v1.0.0")).status_code, 200)
        ref = ts.http(srv, "POST", "/v2/models/chat/generate",
                      json_body={"text_input": "The ", "max_tokens": 200}).json()
        body = json.dumps({"text_input": "The ", "max_tokens": 200})
        proc = subprocess.Popen(["curl", "-sS", "-N", "-H", "Content-Type: application/json", "-d", body,
                                 srv.url + "/v2/models/chat/generate_stream"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        first = proc.stdout.readline()  # the first event: the stream began on v1.0.0
        r = self.apply(srv, "chat", self.descriptor("v1.1.0"))
        self.assertEqual(r.status_code, 200, r.text)
        r = ts.http(srv, "POST", "/v2/models/chat/generate", json_body={"text_input": "The ", "max_tokens": 4})
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(r.headers.get("Mcp-Model-Version"), "v1.1.0")
        rest = proc.stdout.read()  # not communicate(): it would skip what readline buffered
        err = proc.stderr.read()
        self.assertEqual(proc.wait(timeout=120), 0, err)
        events = first + rest
        versions = {json.loads(b[len(b"data: "):])["model_version"] for b in events.split(b"\n\n") if b.strip()}
        self.assertEqual(versions, {"v1.0.0"})
        texts, errors = sse_texts(events)
        self.assertEqual(errors, [])
        self.assertEqual("".join(texts), ref["text_output"], "the old version's stream ran to its end")
        # The new version serves the OpenAI API too.
        r = ts.http(srv, "POST", "/v1/completions", json_body={"model": "chat", "prompt": "The ", "max_tokens": 4})
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(r.headers.get("Mcp-Model-Version"), "v1.1.0")


class GenerateLimitsTests(ts.TempModelsTestCase):
    def descriptor(self, **gen):
        fields = ", ".join(f"{k}: {v}" for k, v in gen.items())
        return f"name: chat\nformat: gguf\npath: {self.gguf}\ninstances: {{threads: 1}}\ngeneration: {{{fields}}}\n"

    def setUp(self):
        super().setUp()
        self.gguf = os.path.join(self.models, "fortunes.gguf")
        shutil.copy(FORTUNES, self.gguf)

    def test_full_queue_answers_429(self):
        srv = self.start("--model-root", self.models)
        r = self.apply(srv, "chat", self.descriptor(max_sequences=1, max_queue_size=1, max_tokens=400))
        self.assertEqual(r.status_code, 200, r.text)
        body = {"text_input": "The ", "max_tokens": 400}
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            rs = list(pool.map(lambda _: ts.http(srv, "POST", "/v2/models/chat/generate", json_body=body), range(12)))
        codes = sorted(r.status_code for r in rs)
        self.assertIn(429, codes)
        self.assertIn(200, codes)
        self.assertEqual(set(codes), {200, 429}, codes)
        for r in rs:
            if r.status_code == 429:
                self.assertIn("queue", r.json()["error"])

    def test_small_kv_budget_many_long_requests(self):
        srv = self.start("--model-root", self.models)
        # A few blocks: sequences give way to each other and are prefilled again.
        r = self.apply(srv, "chat", self.descriptor(max_sequences=8, kv_cache_bytes=65536, step_tokens=32,
                                                    context_length=256))
        self.assertEqual(r.status_code, 200, r.text)
        prompts = ["%s the way of the world " % p * 3 for p in PROMPTS[:12]]
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            rs = list(pool.map(lambda p: ts.http(srv, "POST", "/v2/models/chat/generate",
                                                 json_body={"text_input": p, "max_tokens": 60}), prompts))
        for p, r in zip(prompts, rs):
            self.assertIn(r.status_code, (200, 400, 429, 503), r.text)
            if r.status_code != 200:
                self.assertTrue(r.json()["error"])
        ok = [r for r in rs if r.status_code == 200]
        self.assertTrue(ok, [r.text for r in rs])
        # The same prompt alone gives the same text: preemption recomputes exactly.
        for p, r in zip(prompts, rs):
            if r.status_code == 200:
                alone = ts.http(srv, "POST", "/v2/models/chat/generate", json_body={"text_input": p, "max_tokens": 60})
                self.assertEqual(alone.json()["text_output"], r.json()["text_output"])
                break

    def test_streaming_clients_that_hang_up(self):
        srv = self.start("--model-root", self.models)
        r = self.apply(srv, "chat", self.descriptor(max_sequences=4, max_tokens=4000, max_tokens_limit=4000,
                                                    context_length=4096))
        self.assertEqual(r.status_code, 200, r.text)
        rng = random.Random(12)
        body = json.dumps({"text_input": "The ", "max_tokens": 4000}).encode()
        req = (b"POST /v2/models/chat/generate_stream HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body

        def client(i):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
            try:
                s.sendall(req)
                want = rng.randint(0, 3000)
                got = 0
                while got < want:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    got += len(chunk)
            finally:
                s.close()

        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            list(pool.map(client, range(100)))
        # Every slot came back: four full-length answers run at once and end.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            rs = list(pool.map(lambda _: ts.http(srv, "POST", "/v2/models/chat/generate",
                                                 json_body={"text_input": "The ", "max_tokens": 20}, timeout=60),
                               range(4)))
        for r in rs:
            self.assertEqual(r.status_code, 200, r.text)
        # No sequence and no block left behind (the watcher cancels within a step).
        for _ in range(100):
            s = gen_stats(srv, "chat")
            if (s["kv_cache"]["used_blocks"], s["running"], s["waiting"]) == (0, 0, 0):
                break
            time.sleep(0.05)
        self.assertEqual((s["kv_cache"]["used_blocks"], s["running"], s["waiting"]), (0, 0, 0), s)
        self.assertGreaterEqual(s["requests"], 4)


if __name__ == "__main__":
    unittest.main()
