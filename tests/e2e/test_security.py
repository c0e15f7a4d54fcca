#!/usr/bin/python3
"""Attacks on mcp2026-server, each reproduced against a real server on
127.0.0.1 and answered with a refusal (issue 9, item 0).

The helpers (Server, http, model files) come from test_server.py; run one
class by hand as test_server.py says, e.g.

  MCP_SERVER_BIN=build/bin/mcp2026-server MCPCTL_BIN=build/bin/mcpctl \\
    /usr/bin/python3 -m unittest -v test_security.ModelRootsTests
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import test_server as ts


def setUpModule():
    ts.setUpModule()


def tearDownModule():
    ts.tearDownModule()


def descriptor(name, path, labels=None):
    text = f"name: {name}\nformat: onnx\npath: {path}\n"
    if labels is not None:
        text += f"postprocess:\n  - topk: {{tensor: probabilities, k: 3, labels: {labels}}}\n"
    return text


def load(tc, name, text, descriptor_path=None, headers=None):
    params = {"config": text}
    if descriptor_path is not None:
        params["descriptor_path"] = descriptor_path
    return tc.call("POST", f"/v2/repository/models/{name}/load", json_body={"parameters": params},
                   headers=headers)


PASSWD_LINE = "root:x:0:0"


class ModelRootsTests(ts.RepositoryServerTestCase):
    """Model and labels files resolve, after symbolic links, inside the
    model roots only; a refusal never tells whether a file exists."""

    @classmethod
    def fill_repository(cls, root):
        cls.root = root  # a model root (not the repository: nothing in it loads by itself)
        shutil.copy(ts.DIGITS, os.path.join(root, "digits.onnx"))
        with open(os.path.join(root, "labels.txt"), "w") as f:
            f.write("".join(f"digit {i}\n" for i in range(10)))
        os.symlink("/etc/passwd", os.path.join(root, "passwd_link.txt"))
        os.symlink("/etc", os.path.join(root, "etc_link"))
        os.mkfifo(os.path.join(root, "fifo.onnx"))
        os.mkfifo(os.path.join(root, "fifo.txt"))
        # A Triton folder whose config.pbtxt leads out of the root.
        os.mkdir(os.path.join(root, "tri"))
        os.symlink("/etc/passwd", os.path.join(root, "tri", "config.pbtxt"))

    @classmethod
    def server_args(cls):
        return ["--model-path", ts.DIGITS, "--model-root", cls.root]

    def refused(self, r, path):
        msg = ts.error_message(self, r, 400)
        self.assertIn("outside the model roots", msg)
        self.assertNotIn(PASSWD_LINE, r.text)
        for leak in ("No such file", "not found", "Permission denied", "not a regular"):
            self.assertNotIn(leak, msg, f"refusal of {path} tells more than the rule")
        return msg.replace(path, "<PATH>")

    def test_absolute_model_path_outside_refused_alike_whether_it_exists(self):
        a = self.refused(load(self, "m1", descriptor("m1", "/etc/passwd")), "/etc/passwd")
        b = self.refused(load(self, "m1", descriptor("m1", "/etc/no-such-file-here")), "/etc/no-such-file-here")
        self.assertEqual(a, b, "existing and missing files outside the roots get different answers")

    def test_labels_outside_refused_and_never_echoed(self):
        model = os.path.join(self.root, "digits.onnx")
        self.refused(load(self, "m2", descriptor("m2", model, "/etc/passwd")), "/etc/passwd")
        # The same through a symbolic link planted inside the root.
        link = os.path.join(self.root, "passwd_link.txt")
        self.refused(load(self, "m2", descriptor("m2", model, link)), link)
        self.assertEqual(self.call("GET", "/v2/models/m2").status_code, 404)

    def test_dotdot_refused(self):
        for p in (os.path.join(self.root, "..", "..", "etc", "passwd"), self.root + "/../" + os.path.basename(self.root)
                  + "/digits.onnx"):
            self.refused(load(self, "m3", descriptor("m3", p)), p)

    def test_symlinked_folder_out_of_root_refused(self):
        p = os.path.join(self.root, "etc_link", "passwd")
        self.refused(load(self, "m4", descriptor("m4", p)), p)

    def test_missing_file_behind_a_link_out_of_the_root_answers_as_outside(self):
        """Through a link that leads out of the root, a file that is missing
        gets the same answer as one that exists (no existence oracle)."""
        a = self.refused(load(self, "m4", descriptor("m4", os.path.join(self.root, "etc_link", "passwd"))), "P")
        missing = os.path.join(self.root, "etc_link", "no-such-file-here")
        b = self.refused(load(self, "m4", descriptor("m4", missing)), missing)
        p = os.path.join(self.root, "etc_link", "passwd")
        self.assertEqual(a.replace(p, "<PATH>"), b)

    def test_triton_config_behind_a_link_refused(self):
        text = f"name: t\nformat: triton\npath: {os.path.join(self.root, 'tri')}\n"
        r = load(self, "t", text)
        msg = ts.error_message(self, r, 400)
        self.assertIn("outside the model roots", msg)
        self.assertNotIn("root:", r.text)
        self.assertNotIn("/bin/", r.text)

    def test_failed_load_reason_shows_no_host_path(self):
        """The reason a reload failed is shown to every caller (index,
        describe, inference errors): paths in it are relative to their root."""
        self.assertEqual(load(self, "m9", descriptor("m9", os.path.join(self.root, "digits.onnx"))).status_code, 200)
        r = load(self, "m9", descriptor("m9", os.path.join(self.root, "labels.txt")))
        self.assertNotEqual(r.status_code, 200)
        index = self.call("POST", "/v2/repository/index", json_body={}).json()
        reason = [e.get("reason", "") for e in index if e["name"] == "m9"]
        self.assertEqual(len(reason), 1, index)
        self.assertIn("load failed", reason[0])
        self.assertIn("labels.txt", reason[0])
        self.assertNotIn(self.root, reason[0])
        self.assertNotIn(os.path.realpath(self.root), reason[0])
        self.assertEqual(self.call("POST", "/v2/repository/models/m9/unload").status_code, 200)

    def test_control_from_a_web_page_refused(self):
        """A page in the operator's browser cannot drive model control on a
        loopback server without a token: requests with Origin are refused."""
        for path in ("/v2/repository/models/digits/unload", "/v2/repository/models/digits/load"):
            r = self.call("POST", path, body=b"{}", headers={"Origin": "http://evil.example", "Content-Type": "text/plain"})
            msg = ts.error_message(self, r, 403)
            self.assertIn("Origin", msg)
        self.assertEqual(self.call("GET", "/v2/models/digits/ready").status_code, 200)

    def test_oversize_config_refused_before_the_loader(self):
        text = descriptor("big", os.path.join(self.root, "digits.onnx")) + "#" * (1 << 20) + "\n"
        msg = ts.error_message(self, load(self, "big", text), 413)
        self.assertIn("parameters.config", msg)

    def test_descriptor_path_parameter_cannot_move_the_base(self):
        # A relative path against a base the client names outside the roots.
        r = load(self, "m5", descriptor("m5", "passwd"), descriptor_path="/etc/model.yaml")
        self.refused(r, "/etc/passwd")

    def test_relative_path_resolves_in_the_first_root(self):
        r = load(self, "m6", descriptor("m6", "digits.onnx", "labels.txt"))
        self.assertEqual(r.status_code, 200, r.text)
        d = self.call("GET", "/v2/repository/models/m6").json()
        self.assertEqual(d["path"], "digits.onnx", "describe shows the path relative to its root")
        self.assertEqual(self.call("POST", "/v2/repository/models/m6/unload").status_code, 200)

    def test_describe_never_shows_absolute_paths(self):
        d = self.call("GET", "/v2/repository/models/digits")
        self.assertEqual(d.status_code, 200, d.text)
        self.assertEqual(d.json()["path"], "digits.onnx")
        self.assertNotIn(ts.DEMO_DIR, d.text)

    def test_fifo_refused_without_blocking(self):
        for name, text in (("m7", descriptor("m7", os.path.join(self.root, "fifo.onnx"))),
                           ("m8", descriptor("m8", os.path.join(self.root, "digits.onnx"),
                                             os.path.join(self.root, "fifo.txt")))):
            r = self.call("POST", f"/v2/repository/models/{name}/load", json_body={"parameters": {"config": text}},
                          timeout=30)
            msg = ts.error_message(self, r, 400)
            self.assertIn("not a regular file", msg)
        self.assertEqual(self.call("GET", "/v2/health/ready", timeout=10).status_code, 200)


def thread_count(server):
    with open(f"/proc/{server.proc.pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads line in /proc/PID/status")


class LimitsTests(ts.ServerTestCase):
    """Every size a descriptor from the network sets is capped by the
    server's own limits and checked at load."""

    @classmethod
    def server_args(cls):
        return ["--model-path", ts.DIGITS, "--model-root", ts.MODELS_DIR, "--model-root", ts.DEMO_DIR]

    def test_instances_beyond_the_cores_refused(self):
        before = thread_count(self.server)
        text = descriptor("many", ts.DIGITS) + "instances: {count: 256}\n"
        msg = ts.error_message(self, load(self, "many", text), 400)
        self.assertIn("--max-model-threads", msg)
        self.assertLessEqual(thread_count(self.server), before + 2, "a refused load left threads behind")

    def test_threads_per_instance_capped(self):
        before = thread_count(self.server)
        text = descriptor("wide", ts.DIGITS) + "instances: {count: 1, threads: 1024}\n"
        r = load(self, "wide", text)
        self.assertEqual(r.status_code, 200, r.text)
        r = self.call("POST", "/v2/models/wide/infer",
                      json_body={"inputs": [{"name": "input", "shape": [1, 64], "datatype": "FP32",
                                             "data": [0.0] * 64}]})
        self.assertEqual(r.status_code, 200, r.text)
        # One worker, its batcher and at most the cores' worth of compute threads.
        self.assertLessEqual(thread_count(self.server), before + 2 + (os.cpu_count() or 1) + 2)
        self.assertEqual(self.call("POST", "/v2/repository/models/wide/unload").status_code, 200)

    def test_warmup_shape_capped(self):
        # The model leaves "n" open; the descriptor declares 2^31 - 1 of it.
        text = (descriptor("huge", ts.model_file("slow")) +
                "max_batch_size: 0\ninputs:\n  - name: x\n    shape: [1, 2147483647, -1]\n")
        r = self.call("POST", "/v2/repository/models/huge/load", json_body={"parameters": {"config": text}},
                      timeout=60)
        msg = ts.error_message(self, r, 400)
        self.assertIn("warm-up", msg)
        self.assertEqual(self.call("GET", "/v2/health/ready", timeout=10).status_code, 200)

    def test_describe_shows_every_field_as_applied(self):
        text = descriptor("applied", ts.DIGITS) + "instances: {count: 1, threads: 1024}\nwarmup: 3\n"
        self.assertEqual(load(self, "applied", text).status_code, 200)
        d = self.call("GET", "/v2/repository/models/applied").json()
        applied = d["descriptor"]
        self.assertEqual(applied["instances"]["count"], 1)
        self.assertLessEqual(applied["instances"]["threads"], max(os.cpu_count() or 1, 1),
                             "describe does not show the capped thread count")
        self.assertEqual(applied["warmup"], 3)
        self.assertEqual(applied["precision"], "fp32")
        self.assertEqual(d["format"], "onnx")
        self.assertEqual(self.call("POST", "/v2/repository/models/applied/unload").status_code, 200)

    def test_warmup_false_skips_the_warmup(self):
        # The same declared 2^31 dimension loads when no warm-up runs.
        text = (descriptor("nowarm", ts.model_file("slow")) + "max_batch_size: 0\nwarmup: false\n"
                "inputs:\n  - name: x\n    shape: [1, 2147483647, -1]\n")
        r = load(self, "nowarm", text)
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(self.call("GET", "/v2/repository/models/nowarm").json()["descriptor"]["warmup"], 0)
        self.assertEqual(self.call("POST", "/v2/repository/models/nowarm/unload").status_code, 200)

    def test_topk_beyond_classes_refused_at_load(self):
        text = descriptor("topk_big", ts.DIGITS) + "postprocess:\n  - topk: {tensor: probabilities, k: 1000000}\n"
        msg = ts.error_message(self, load(self, "topk_big", text), 400)
        self.assertIn("10 classes", msg)

    def test_step_settings_checked_at_load(self):
        cases = [
            ("preprocess:\n  - normalize: {mean: [0, 0, 0], std: [1, 1, 1], axis: 1}\n", "64 entries"),
            ("preprocess:\n  - normalize: {mean: [0], std: [1], axis: 5}\n", "axis 5"),
            ("postprocess:\n  - softmax: {tensor: probabilities, axis: 3}\n", "axis 3"),
            ("postprocess:\n  - softmax: {tensor: label}\n", None),
        ]
        for extra, needle in cases:
            r = load(self, "steps_bad", descriptor("steps_bad", ts.DIGITS) + extra)
            if needle is None:
                # Softmax of the int64 label is arithmetic on integers: allowed.
                self.assertEqual(r.status_code, 200, r.text)
                self.call("POST", "/v2/repository/models/steps_bad/unload")
                continue
            msg = ts.error_message(self, r, 400)
            self.assertIn(needle, msg, extra)

    def test_failed_loads_leave_no_entries(self):
        before = self.call("POST", "/v2/repository/index").json()
        text = "postprocess:\n  - topk: {tensor: probabilities, k: 11}\n"
        for i in range(300):
            name = f"failing_{i}"
            r = load(self, name, descriptor(name, ts.DIGITS) + text)
            self.assertEqual(r.status_code, 400, r.text)
        after = self.call("POST", "/v2/repository/index").json()
        self.assertEqual(len(after), len(before), "failed loads left entries")
        self.assertNotIn("failing_", self.call("GET", "/metrics").text)
        self.assertNotIn("failing_", self.call("GET", "/v2/models/stats").text)
        self.assertEqual(self.call("GET", "/v2/models/failing_3").status_code, 404)


class LargeRepositoryTests(ts.RepositoryServerTestCase):
    """A repository folder of thousands of files loses no model."""

    @classmethod
    def fill_repository(cls, repo):
        for i in range(2000):
            open(os.path.join(repo, f"notes_{i:04d}.txt"), "w").close()
        shutil.copy(ts.DIGITS, os.path.join(repo, "digits.onnx"))
        for name in ("aaa", "mmm", "zzz"):
            with open(os.path.join(repo, f"{name}.yaml"), "w") as f:
                f.write(descriptor(name, "digits.onnx"))

    def test_every_model_loaded(self):
        index = {e["name"]: e["state"] for e in self.call("POST", "/v2/repository/index").json()}
        self.assertEqual(index, {"aaa": "READY", "mmm": "READY", "zzz": "READY"})


class DeadlineTests(ts.ServerTestCase):
    """Deadlines and cancels reach requests in every queued stage, and a
    half-closed client still gets its answer."""

    @classmethod
    def server_args(cls):
        return ["--model-path", ts.model_file("slow"), "--workers", 1, "--max-batch-size", 1,
                "--prefetch-queue-depth", 8]

    def post_async(self, pool, x, parameters=None):
        body, headers = ts.v2_request([("x", "FP32", x, False)], parameters=parameters)
        return pool.submit(ts.http, self.server, "POST", "/v2/models/slow/infer", body=body, headers=headers)

    def inflight(self):
        return ts.metric_sum(ts.get_metrics(self, self.server)[1], "mcp_inflight_requests")

    def test_timeout_in_a_prefetched_batch(self):
        with ts.concurrent.futures.ThreadPoolExecutor(max_workers=5) as pool:
            blocker = self.post_async(pool, ts.slow_input(20, ts.LONG * 4))
            ts.wait_for(lambda: self.inflight() >= 1, "the blocking request to run")
            # Formed into batches ahead of the busy worker (prefetch), not queued.
            fillers = [self.post_async(pool, ts.slow_input(21 + i, ts.LONG * 8)) for i in range(3)]
            ts.wait_for(lambda: self.inflight() >= 4, "the fillers to be accepted")
            r = self.infer("slow", [("x", "FP32", ts.slow_input(30), False)], parameters={"timeout": 100_000})
            msg = ts.error_message(self, r, 504)
            self.assertIn("timed out", msg)
            self.assertFalse(all(f.done() for f in fillers),
                             "the 504 came only after the batches ahead of it ran")
            for f in [blocker, *fillers]:
                self.assertEqual(f.result(timeout=ts.HTTP_TIMEOUT_S).status_code, 200)

    def test_half_closed_client_gets_its_answer(self):
        x = ts.slow_input(40)
        with ts.concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            blocker = self.post_async(pool, ts.slow_input(41, ts.LONG * 2))
            ts.wait_for(lambda: self.inflight() >= 1, "the blocking request to run")
            body, _ = ts.v2_request([("x", "FP32", x, False)])
            head = (f"POST /v2/models/slow/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
            sock = ts.socket.create_connection(("127.0.0.1", self.server.port), timeout=60)
            try:
                sock.sendall(head + body)
                sock.shutdown(ts.socket.SHUT_WR)  # legal: the request is complete
                data = b""
                while True:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            finally:
                sock.close()
            blocker.result(timeout=ts.HTTP_TIMEOUT_S)
        # Interim 1xx answers may come first; the final one is 200.
        finals = [m for m in ts.re.findall(rb"HTTP/1\.1 (\d{3})", data) if not m.startswith(b"1")]
        self.assertEqual(finals[:1], [b"200"], data[:300])
        payload = json.loads(data[data.rindex(b"\r\n\r\n") + 4:])
        got = ts.np.array(payload["outputs"][0]["data"], dtype=ts.np.float32)
        want = ts.mcpctl_run(ts.model_file("slow"), x=x)["y"].reshape(-1)
        self.assertTrue(ts.np.array_equal(got, want))


class BusyUnloadTests(ts.ServerTestCase):
    """Unloading a busy model answers at once; its requests finish on it
    and the transport threads stay free for everyone else."""

    @classmethod
    def server_args(cls):
        return ["--model-path", ts.model_file("slow"), "--workers", 1, "--max-batch-size", 1, "--http-threads", 1,
                "--model-root", ts.MODELS_DIR]

    def test_load_runs_off_the_transport_thread(self):
        # A load whose warm-up takes a while (20 runs of a long input).
        text = (descriptor("slow_load", ts.model_file("slow")) + "max_batch_size: 0\nwarmup: 20\n"
                f"inputs:\n  - name: x\n    shape: [1, {ts.LONG // 2}, -1]\n")
        with ts.concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            loading = pool.submit(load, self, "slow_load", text)
            ts.wait_for(lambda: any(e["name"] == "slow_load" for e in self.call("POST", "/v2/repository/index").json()),
                        "the load to start")
            # One transport thread: these answer only because the load is elsewhere.
            self.assertEqual(self.call("GET", "/v2/health/live").status_code, 200)
            r = self.infer("slow", [("x", "FP32", ts.slow_input(70), False)])
            self.assertEqual(r.status_code, 200, r.text)
            self.assertFalse(loading.done(), "the load finished before the other requests were answered")
            self.assertEqual(loading.result(timeout=ts.HTTP_TIMEOUT_S).status_code, 200)
        self.assertEqual(self.call("GET", "/v2/models/slow_load/ready").status_code, 200)

    def test_loads_of_different_models_run_side_by_side(self):
        slow = (descriptor("slow_a", ts.model_file("slow")) + "max_batch_size: 0\nwarmup: 16\n"
                f"inputs:\n  - name: x\n    shape: [1, {ts.LONG // 2}, -1]\n")
        with ts.concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            a = pool.submit(load, self, "slow_a", slow)
            ts.wait_for(lambda: any(e["name"] == "slow_a" and e["reason"].startswith("loading: ")
                                    for e in self.call("POST", "/v2/repository/index").json()), "the slow load to start")
            r = load(self, "quick_b", descriptor("quick_b", ts.model_file("identity_fp32")))
            self.assertEqual(r.status_code, 200, r.text)
            self.assertFalse(a.done(), "the second model's load waited for the first's")
            self.assertEqual(a.result(timeout=ts.HTTP_TIMEOUT_S).status_code, 200)

    def test_load_without_waiting(self):
        text = (descriptor("slow_async", ts.model_file("slow")) + "max_batch_size: 0\nwarmup: 12\n"
                f"inputs:\n  - name: x\n    shape: [1, {ts.LONG // 2}, -1]\n")
        r = self.call("POST", "/v2/repository/models/slow_async/load",
                      json_body={"parameters": {"config": text, "wait": False}})
        self.assertEqual(r.status_code, 202, r.text)
        self.assertEqual(r.json(), {"state": "LOADING"})
        seen = set()

        def state():
            for e in self.call("POST", "/v2/repository/index").json():
                if e["name"] == "slow_async":
                    if e["reason"].startswith("loading: "):
                        seen.add(e["reason"].split(",")[0])
                    return e["state"] == "READY"
            return False
        ts.wait_for(state, "the load to finish", timeout=ts.HTTP_TIMEOUT_S)
        self.assertTrue(seen, "the index never showed the load's phase")
        self.assertEqual(self.call("GET", "/v2/models/slow_async/ready").status_code, 200)
        r = self.call("POST", "/v2/repository/models/slow_async/load", json_body={"parameters": {"wait": "no"}})
        self.assertIn("wait", ts.error_message(self, r, 400))

    def test_unload_does_not_block_transport(self):
        with ts.concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            busy = []
            for i in range(4):
                body, headers = ts.v2_request([("x", "FP32", ts.slow_input(50 + i, ts.LONG * 4), False)])
                busy.append(pool.submit(ts.http, self.server, "POST", "/v2/models/slow/infer", body=body,
                                        headers=headers))
            ts.wait_for(lambda: ts.metric_sum(ts.get_metrics(self, self.server)[1], "mcp_inflight_requests") >= 4,
                        "the requests to be in flight")
            r = self.call("POST", "/v2/repository/models/slow/unload")
            self.assertEqual(r.status_code, 200, r.text)
            # One transport thread: these answer only if the unload left it.
            self.assertEqual(self.call("GET", "/v2/health/live").status_code, 200)
            self.assertEqual(self.call("GET", "/v2/models/slow/ready").status_code, 404)
            self.assertFalse(all(f.done() for f in busy), "the unload waited for the drain")
            for f in busy:
                self.assertEqual(f.result(timeout=ts.HTTP_TIMEOUT_S).status_code, 200,
                                 "a request accepted before the unload did not finish on its version")


def raw_exchange(port, data, timeout=30, source=None, keep_sending=None):
    """Sends data on a fresh connection and reads until the server closes
    it (bounded by timeout). Returns the bytes received."""
    sock = ts.socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                       source_address=(source, 0) if source else None)
    out = b""
    try:
        sock.sendall(data)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        sock.close()
    return out


def statuses(data):
    return [int(m) for m in ts.re.findall(rb"HTTP/1\.[01] (\d{3}) ", data)]


class FramingTests(ts.ServerTestCase):
    """Request framing that could smuggle a request or pull in an unbounded
    body is answered before the body, and the connection closes."""

    @classmethod
    def server_args(cls):
        return ["--model-path", ts.DIGITS, "--max-body-bytes", 100000]

    def test_smuggled_request_in_a_second_content_length(self):
        smuggled = b"POST /v2/repository/models/digits/unload HTTP/1.1\r\nHost: x\r\n\r\n"
        data = raw_exchange(self.server.port, b"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\n"
                            b"Content-Length: 2\r\nContent-Length: " + str(2 + len(smuggled)).encode() +
                            b"\r\n\r\n{}" + smuggled)
        self.assertEqual(statuses(data), [400], data)
        self.assertIn(b"Connection: close", data)
        self.assertIn(b"Content-Length headers with different values", data)
        self.assertEqual(self.call("GET", "/v2/models/digits/ready").status_code, 200, "the smuggled unload ran")

    def test_overlong_content_length_refused(self):
        # Too long to keep whole: two such headers could differ past what is kept.
        data = raw_exchange(self.server.port, b"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\n"
                            b"Content-Length: " + b"0" * 40 + b"2\r\n\r\n{}")
        self.assertEqual(statuses(data), [400], data)
        self.assertIn(b"is not a number of bytes", data)

    def test_content_length_with_chunked_refused(self):
        data = raw_exchange(self.server.port, b"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\n"
                            b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        self.assertEqual(statuses(data), [400], data)

    def test_oversize_content_length_answered_before_the_body(self):
        for extra in (b"", b"Expect: 100-continue\r\n"):
            # The body is never sent: the answer must not wait for it.
            data = raw_exchange(self.server.port, b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: x\r\n"
                                b"Content-Type: application/json\r\nContent-Length: 99999999999\r\n" + extra +
                                b"\r\n")
            self.assertEqual(statuses(data), [413], data)
            self.assertNotIn(b"100 Continue", data)

    def test_many_query_parameters_414(self):
        q = "&".join(f"p{i}=v" for i in range(300))
        data = raw_exchange(self.server.port, f"GET /v2/health/live?{q} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        self.assertEqual(statuses(data), [414], data)
        self.assertIn(b"300 query parameters", data)
        # A few parameters are fine.
        self.assertEqual(self.call("GET", "/v2/health/live?a=1&b=2").status_code, 200)


class SlowClientTests(ts.ServerTestCase):
    """Slowloris and trickled bodies are cut off by the header deadline and
    the minimum body rate."""

    @classmethod
    def server_args(cls):
        return ["--model-path", ts.DIGITS, "--header-timeout", 2, "--min-body-rate", 1024]

    def trickle(self, head, byte, count, pause):
        """Sends head, then `count` single bytes `pause` s apart; returns how
        many the server took before it closed the connection."""
        sock = ts.socket.create_connection(("127.0.0.1", self.server.port), timeout=30)
        sent = 0
        try:
            sock.sendall(head)
            for sent in range(count):
                ts.time.sleep(pause)
                sock.sendall(byte)
                sock.setblocking(False)
                try:
                    if sock.recv(4096) == b"":
                        return sent
                except BlockingIOError:
                    pass
                except ConnectionResetError:
                    return sent
                finally:
                    sock.setblocking(True)
            return count
        except (BrokenPipeError, ConnectionResetError):
            return sent
        finally:
            sock.close()

    def test_slowloris_headers_cut(self):
        taken = self.trickle(b"GET /v2/health/live HTTP/1.1\r\nX-Slow: ", b"a", 60, 0.25)
        self.assertLess(taken, 60, "a client sending a header byte every 0.25 s was never cut off")
        self.assertEqual(self.call("GET", "/v2/health/live").status_code, 200)

    def test_trickled_body_cut(self):
        head = (b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 60000\r\n\r\n")
        taken = self.trickle(head, b" ", 60, 0.25)
        self.assertLess(taken, 60, "a body arriving at 4 bytes/s was never cut off")


class ConnectionReserveTests(ts.ServerTestCase):
    """One client cannot take every connection, and health and metrics still
    answer when the connection limit is reached."""

    @classmethod
    def server_args(cls):
        return ["--model-path", ts.DIGITS, "--max-connections", 24, "--max-connections-per-client", 12,
                "--header-timeout", 60]

    def hold(self, n, source):
        socks = []
        for _ in range(n):
            sock = ts.socket.create_connection(("127.0.0.1", self.server.port), timeout=30,
                                               source_address=(source, 0))
            sock.sendall(b"GET /v2/health/live HTTP/1.1\r\n")  # never finished
            socks.append(sock)
        return socks

    def closed_at_once(self, source):
        sock = ts.socket.create_connection(("127.0.0.1", self.server.port), timeout=30, source_address=(source, 0))
        try:
            sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            return sock.recv(4096) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        finally:
            sock.close()

    def test_per_client_limit_then_reserve(self):
        held = []
        try:
            held += self.hold(12, "127.0.0.2")
            # Connections are registered by the server's threads: let them land.
            ts.wait_for(lambda: self.closed_at_once("127.0.0.2"), "the per-client limit to apply")
            held += self.hold(12, "127.0.0.3")
            # 24 connections: the limit. Health and metrics still answer.
            live = raw_exchange(self.server.port, b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n"
                                b"Connection: close\r\n\r\n", source="127.0.0.4")
            self.assertEqual(statuses(live), [200], live)
            metrics = raw_exchange(self.server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
                                   b"Connection: close\r\n\r\n", source="127.0.0.5")
            self.assertEqual(statuses(metrics), [200], metrics[:200])
            body = json.dumps({"inputs": [{"name": "input", "shape": [1, 64], "datatype": "FP32",
                                           "data": [0.0] * 64}]}).encode()
            infer = raw_exchange(self.server.port, b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: x\r\n"
                                 b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() +
                                 b"\r\n\r\n" + body, source="127.0.0.6")
            self.assertEqual(statuses(infer), [503], infer)
        finally:
            for sock in held:
                sock.close()
        ts.wait_for(lambda: self.call("GET", "/v2/health/ready").status_code == 200, "the server to recover")
        self.assertEqual(self.infer("digits", [("input", "FP32", ts.samples()[0], False)]).status_code, 200)


class RequestShapeTests(ts.ServerTestCase):
    """Smaller holes: bodies that are empty, of the wrong JSON kind, ragged
    or asking for what the server does not do get a 400 that says so, and
    request bodies in flight are capped server-wide."""

    @classmethod
    def server_args(cls):
        # A long header timeout: the body-rate window is as long, so a client
        # holding a body on purpose is not cut while a slow machine runs it.
        return ["--model-path", ts.DIGITS, "--model-root", ts.DEMO_DIR, "--max-body-bytes", 90000,
                "--max-inflight-body-bytes", 100000, "--header-timeout", 120]

    def test_empty_body_says_so(self):
        for path in ("/v2/models/digits/infer", "/v1/models/digits:predict", "/v1/infer"):
            msg = ts.error_message(self, self.call("POST", path, body=b"",
                                                   headers={"Content-Type": "application/json"}), 400)
            self.assertIn("empty", msg, path)
            self.assertNotIn("wrong arguments", msg)

    def test_load_body_must_be_an_object(self):
        for body in (b"[]", b"[{\"parameters\": {}}]", b"5", b"{\"parameters\": []}"):
            r = self.call("POST", "/v2/repository/models/digits/load", body=body,
                          headers={"Content-Type": "application/json"})
            ts.error_message(self, r, 400)
        self.assertEqual(self.call("GET", "/v2/models/digits/ready").status_code, 200)

    def test_ragged_nested_data_refused(self):
        row = [0.0] * 64
        for data, shape in (([row, row[:63] + [0.0, 0.0]], [2, 64]), ([row, [row[:32], row[32:]]], [2, 64]),
                            ([row[:32], row[32:] + [0.0], row[:31]], [1, 64])):
            r = self.call("POST", "/v2/models/digits/infer",
                          json_body={"inputs": [{"name": "input", "shape": shape, "datatype": "FP32", "data": data}]})
            msg = ts.error_message(self, r, 400)
            self.assertRegex(msg, "ragged|needs|nested")
        # Flat and exactly nested data are both fine.
        for data in (row * 2, [row, row]):
            r = self.call("POST", "/v2/models/digits/infer",
                          json_body={"inputs": [{"name": "input", "shape": [2, 64], "datatype": "FP32", "data": data}]})
            self.assertEqual(r.status_code, 200, r.text)

    def test_triton_file_override_refused(self):
        r = load(self, "digits", descriptor("digits", os.path.join(ts.DEMO_DIR, "digits.onnx")))
        self.assertEqual(r.status_code, 200, r.text)
        r = self.call("POST", "/v2/repository/models/digits/load",
                      json_body={"parameters": {"file:1/model.onnx": "AAAA"}})
        msg = ts.error_message(self, r, 400)
        self.assertIn("file:1/model.onnx", msg)

    def test_bodies_in_flight_capped(self):
        # One client holds the 80,000 bytes it has sent of a body it has not
        # finished; a second body that would pass the cap is refused.
        sock = ts.socket.create_connection(("127.0.0.1", self.server.port), timeout=30)
        stop = ts.threading.Event()

        def trickle():
            # A byte now and then keeps the upload alive and the server
            # reading it (all of the 80,000 are read, not only a buffer's
            # worth); far below the 5,000 bytes it has left to declare.
            for _ in range(2000):
                if stop.wait(0.2):
                    return
                try:
                    sock.sendall(b" ")
                except OSError:
                    return

        feeder = ts.threading.Thread(target=trickle, daemon=True)
        try:
            sock.sendall(b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 85000\r\n\r\n{" + b" " * 79999)
            feeder.start()
            # The server reads the 80,000 bytes on its own time; a probe
            # that came first would hold its bytes and push the first body
            # over the cap instead (then dropped, never held).
            ts.wait_for(lambda: ts.metric_sum(ts.get_metrics(self, self.server)[1], "mcp_request_body_bytes_held")
                        >= 80000, "the first body's bytes to be held")

            def second():
                return raw_exchange(self.server.port, b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: x\r\n"
                                    b"Content-Type: application/json\r\nConnection: close\r\n"
                                    b"Content-Length: 30000\r\n\r\n" + b" " * 30000)
            data = ts.wait_for(lambda: (lambda d: d if statuses(d) == [503] else None)(second()),
                               "the cap to be reached")
            self.assertIn(b"request body bytes", data)
        finally:
            stop.set()
            if feeder.is_alive():
                feeder.join(10)
            sock.close()
        ts.wait_for(lambda: self.infer("digits", [("input", "FP32", ts.samples()[0], False)]).status_code == 200,
                    "the held bytes to be released")

    def test_declared_length_books_nothing(self):
        """A client that declares a large body and sends it slowly holds only
        what it sent: declaring costs nothing, so it cannot lock the others
        out of the cap."""
        socks = []
        try:
            for _ in range(3):  # 3 x 90,000 declared, far over the 100,000 cap
                sock = ts.socket.create_connection(("127.0.0.1", self.server.port), timeout=30)
                sock.sendall(b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 90000\r\n\r\n{")
                socks.append(sock)
            time.sleep(0.3)
            r = self.infer("digits", [("input", "FP32", ts.samples()[0], False)])
            self.assertEqual(r.status_code, 200, r.text)
        finally:
            for sock in socks:
                sock.close()


class CastSaturationTests(ts.ServerTestCase):
    """The cast step saturates at the target type's range (NaN to 0) for
    every source type, in both directions."""

    @classmethod
    def server_args(cls):
        return ["--model-path", ts.DIGITS, "--model-root", ts.MODELS_DIR]

    def test_preprocess_float_to_int64(self):
        text = (descriptor("cast_in", ts.model_file("identity_int64")) + "max_batch_size: 0\n"
                "inputs:\n  - name: ident_in\n    dtype: FP64\n    shape: [1, 3]\n"
                "preprocess:\n  - cast: {dtype: INT64}\n")
        r = load(self, "cast_in", text)
        self.assertEqual(r.status_code, 200, r.text)
        x = ts.np.array([[1e30, -1e30, float("nan")]], dtype=ts.np.float64)
        r = self.infer("cast_in", [("ident_in", "FP64", x, True)])
        _, out = ts.parse_v2_response(self, r)
        self.assertEqual(out["ident_out"].tolist(), [[2**63 - 1, -2**63, 0]])

    def test_postprocess_int64_to_int8_and_uint8(self):
        for dtype, want in (("INT8", [[127, -128, 5]]), ("UINT8", [[255, 0, 5]])):
            name = f"cast_out_{dtype.lower()}"
            text = (descriptor(name, ts.model_file("identity_int64")) + "max_batch_size: 0\n"
                    f"postprocess:\n  - cast: {{dtype: {dtype}}}\n")
            r = load(self, name, text)
            self.assertEqual(r.status_code, 200, r.text)
            x = ts.np.array([[300, -300, 5]], dtype=ts.np.int64)
            _, out = ts.parse_v2_response(self, self.infer(name, [("ident_in", "INT64", x, False)]))
            self.assertEqual(out["ident_out"].tolist(), want, dtype)


class ContentCodingTests(ts.ServerTestCase):
    """Compressed request bodies (gzip, deflate) are inflated within the
    body limit, so a zip bomb gets 413; an unknown coding gets 415;
    answers are gzipped only for clients that accept it."""

    @classmethod
    def server_args(cls):
        return ["--model-path", ts.DIGITS, "--max-body-bytes", 200000]

    def infer_body(self):
        x = ts.samples()[2]
        body, _ = ts.v2_request([("input", "FP32", x, False)])
        return x, body

    def test_gzip_and_deflate_bodies(self):
        import zlib, gzip
        x, body = self.infer_body()
        want = ts.mcpctl_run(ts.DIGITS, input=x)
        raw_deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
        for coding, data in (("gzip", gzip.compress(body)), ("deflate", zlib.compress(body)),
                             ("deflate", raw_deflate.compress(body) + raw_deflate.flush())):
            with self.subTest(coding=coding):
                r = self.call("POST", "/v2/models/digits/infer", body=data,
                              headers={"Content-Type": "application/json", "Content-Encoding": coding})
                _, out = ts.parse_v2_response(self, r)
                ts.assert_identical(self, out["probabilities"], want["probabilities"], coding)

    def test_zip_bomb_413(self):
        import gzip
        bomb = gzip.compress(b"{" + b" " * (50 << 20) + b"}")  # 50 MiB of spaces in ~50 KiB
        self.assertLess(len(bomb), 200000)
        r = self.call("POST", "/v2/models/digits/infer", body=bomb,
                      headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}, validate=False)
        msg = ts.error_message(self, r, 413)
        self.assertIn("inflates", msg)
        self.assertEqual(self.call("GET", "/v2/health/live").status_code, 200)

    def test_corrupt_and_unknown_codings(self):
        _, body = self.infer_body()
        r = self.call("POST", "/v2/models/digits/infer", body=body,
                      headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}, validate=False)
        self.assertIn("gzip", ts.error_message(self, r, 400))
        r = self.call("POST", "/v2/models/digits/infer", body=body,
                      headers={"Content-Type": "application/json", "Content-Encoding": "br"}, validate=False)
        self.assertIn("br", ts.error_message(self, r, 415))

    def test_answers_gzipped_only_when_accepted(self):
        _, body = self.infer_body()
        for accept, coded in (("gzip", True), ("gzip;q=0", False), ("identity", False), ("*", True)):
            with self.subTest(accept=accept):
                r = self.call("GET", "/openapi.json", headers={"Accept-Encoding": accept})
                self.assertEqual(r.status_code, 200)
                self.assertEqual(r.headers.get("Content-Encoding") == "gzip", coded, r.headers)
                self.assertTrue(r.json())  # requests inflates it

    def test_small_and_large_answers_inflate_to_the_same_bytes(self):
        # The deflate state is sized to each answer: a window from 512 bytes
        # up to the full 32 KB; the stream must inflate exactly either way.
        import zlib
        sizes = []
        for path in ("/v2/models/digits", "/v2/repository/models/digits", "/metrics", "/openapi.json"):
            with self.subTest(path=path):
                plain = self.call("GET", path, headers={"Accept-Encoding": "identity"}, validate=False)
                sizes.append(len(plain.content))
                coded = ts.requests.get(self.server.url + path, headers={"Accept-Encoding": "gzip"}, stream=True,
                                        timeout=ts.HTTP_TIMEOUT_S)
                raw = coded.raw.read(decode_content=False)
                self.assertEqual(plain.status_code, 200)
                if len(plain.content) >= 1024:
                    self.assertEqual(coded.headers.get("Content-Encoding"), "gzip", coded.headers)
                    inflated = zlib.decompress(raw, 16 + 15)
                    if path == "/metrics":
                        # Live values (open connections) move between the two
                        # fetches; the families and their order do not.
                        def families(b):
                            return [ln for ln in b.split(b"\n") if ln.startswith(b"# ")]
                        self.assertEqual(families(inflated), families(plain.content))
                        self.assertGreater(len(families(inflated)), 10)
                    else:
                        self.assertEqual(inflated, plain.content)
                else:
                    self.assertEqual(raw, plain.content)
        # One answer under the 1 KB bar, some compressed with a window
        # smaller than the full one, one with the full 32 KB.
        self.assertLess(sizes[0], 1024, sizes)
        self.assertTrue(1024 <= sizes[1] < 32768 and sizes[3] > 32768, sizes)


class NoRootsTests(ts.ServerTestCase):
    """A server given only --model-path has no model roots: the load API
    takes no descriptor that names a file."""

    def test_load_with_descriptor_refused(self):
        r = load(self, "x", descriptor("x", ts.DIGITS))
        msg = ts.error_message(self, r, 400)
        self.assertIn("no model roots", msg)
        self.assertIn("--model-root", msg)


class AdminTokenTests(ts.ServerTestCase):
    """--admin-token-file: load and unload need the bearer token."""
    TOKEN = "s3cret-token-0123456789"

    @classmethod
    def server_args(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mcp-e2e-token-")
        return ["--model-path", ts.DIGITS, "--admin-token-file", ts.write_token_file(cls.tmp, cls.TOKEN)]

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_management_needs_the_token(self):
        for path in ("/v2/repository/models/digits/load", "/v2/repository/models/digits/unload"):
            r = self.call("POST", path)
            ts.error_message(self, r, 401)
            self.assertTrue(r.headers.get("WWW-Authenticate", "").startswith("Bearer"), r.headers)
            for bad in ("Bearer wrong", "Bearer " + self.TOKEN[:-1], "Bearer " + self.TOKEN + "x",
                        "Basic " + self.TOKEN, self.TOKEN):
                r = self.call("POST", path, headers={"Authorization": bad})
                ts.error_message(self, r, 401)
        self.assertEqual(self.call("GET", "/v2/models/digits/ready").status_code, 200, "an unauthorised unload ran")
        auth = {"Authorization": "Bearer " + self.TOKEN}
        self.assertEqual(self.call("POST", "/v2/repository/models/digits/unload", headers=auth).status_code, 200)
        self.assertEqual(self.call("GET", "/v2/models/digits/ready").status_code, 404)

    def test_rollout_calls_need_the_token(self):
        body = json.dumps({"action": "undo"}).encode()
        for method, data in (("GET", None), ("POST", body)):
            for hdrs in ({}, {"Authorization": "Bearer wrong"}):
                r = self.call(method, "/v2/models/digits/rollout", body=data, headers=hdrs)
                ts.error_message(self, r, 401)
        auth = {"Authorization": "Bearer " + self.TOKEN}
        r = self.call("GET", "/v2/models/digits/rollout", headers=auth)
        if r.status_code == 200:  # digits may have been unloaded by the other test
            self.assertEqual(r.json()["model"], "digits")
        env = dict(os.environ, MCP_ADMIN_TOKEN=self.TOKEN)
        p = subprocess.run([ts.MCPCTL_BIN, "rollout", "status", "digits", "--server", self.server.url, "--json"],
                           capture_output=True, timeout=60, env=env)
        self.assertIn(p.returncode, (0, 1), p.stderr.decode())
        self.assertNotIn("401", p.stderr.decode())
        p = subprocess.run([ts.MCPCTL_BIN, "rollout", "status", "digits", "--server", self.server.url],
                           capture_output=True, timeout=60, env={k: v for k, v in os.environ.items()
                                                                  if k != "MCP_ADMIN_TOKEN"})
        self.assertEqual(p.returncode, 1)
        self.assertIn("Bearer", p.stderr.decode())

    def test_inference_and_health_need_no_token(self):
        self.assertEqual(self.call("GET", "/v2/health/live").status_code, 200)
        self.assertEqual(self.call("GET", "/metrics").status_code, 200)


class StartupRefusalTests(unittest.TestCase):
    """Configurations that would expose model control are refused before
    the server binds anything."""

    def run_server(self, *args):
        return subprocess.run([ts.SERVER_BIN, "--model-path", ts.DIGITS, "--port", "0", *args],
                              capture_output=True, timeout=60, stdin=subprocess.DEVNULL)

    def test_off_loopback_without_token_refused(self):
        p = self.run_server("--host", "0.0.0.0")
        self.assertEqual(p.returncode, 2, p.stderr)
        err = p.stderr.decode()
        self.assertIn("--admin-token-file", err)
        self.assertIn("--model-control none", err)
        self.assertNotIn("listening", err)

    def test_name_that_only_looks_loopback_refused(self):
        # Not an address: a name, which resolves (if at all) wherever its
        # owner says. Only addresses that are all loopback count.
        for host in ("127.0.0.1.example.com", "127.evil"):
            p = self.run_server("--host", host)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("--admin-token-file", p.stderr.decode(), host)

    def test_grpc_port_in_use_refused(self):
        # The port is not shared with whoever holds it (no SO_REUSEPORT).
        import socket
        with socket.socket() as held:
            held.bind(("127.0.0.1", 0))
            held.listen()
            port = held.getsockname()[1]
            p = self.run_server("--host", "127.0.0.1", "--grpc-port", str(port))
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"cannot listen on 127.0.0.1:{port}", p.stderr.decode())

    def test_weak_or_missing_token_file_refused(self):
        with tempfile.TemporaryDirectory() as d:
            short = os.path.join(d, "short")
            with open(short, "w") as f:
                f.write("abc\n")
            for path in (short, os.path.join(d, "missing")):
                p = self.run_server("--host", "127.0.0.1", "--admin-token-file", path)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("--admin-token-file", p.stderr.decode())
                self.assertNotIn("listening", p.stderr.decode())


if __name__ == "__main__":
    unittest.main()


class TensorLimitTests(ts.ServerTestCase):
    """--max-tensor-bytes: a request whose inputs would make a node produce a
    tensor over the limit gets a 400 naming the limit, and the model goes on
    serving requests within it."""

    @classmethod
    def server_args(cls):
        # The demo model's first node writes 256 bytes a row.
        return ["--model-path", ts.DIGITS, "--max-tensor-bytes", 2048]

    def test_request_over_the_limit_refused(self):
        x = ts.samples()[0]
        self.assertEqual(self.infer("digits", [("input", "FP32", x, False)]).status_code, 200)
        big = ts.np.repeat(x, 16, axis=0)  # 4096 bytes a node
        msg = ts.error_message(self, self.infer("digits", [("input", "FP32", big, False)]), 400)
        self.assertIn("max_tensor_bytes", msg)
        self.assertIn("2048", msg)
        r = self.infer("digits", [("input", "FP32", ts.np.repeat(x, 4, axis=0), False)])
        self.assertEqual(r.status_code, 200, r.text)
