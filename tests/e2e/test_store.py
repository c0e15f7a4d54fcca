"""The control plane's store and catalog through a real server (--store):
a version applied over the API is stored and comes back after kill -9, from
the store even when its original files are gone; an unloaded model stays
unloaded; failed applies are events without host paths; the event log is
a management call with checked parameters, and mcpctl reads it.

Run by ctest (tests/e2e/CMakeLists.txt), one entry per class."""
import json
import os
import subprocess
import unittest

import test_server as ts


def setUpModule():
    ts.setUpModule()


def tearDownModule():
    ts.tearDownModule()


descriptor = ts.digits_descriptor


class StoreTests(ts.TempModelsTestCase):
    def setUp(self):
        super().setUp()
        self.labels = os.path.join(self.models, "labels.txt")
        with open(self.labels, "w") as f:
            f.write("".join(f"digit {i}\n" for i in range(10)))
        self.store = os.path.join(self.tmp, "store")
        self.server = None

    def start(self, *extra):
        self.server = super().start("--model-root", self.models, "--store", self.store, *extra)
        return self.server

    def kill9(self):
        self.server.kill()
        self.server = None

    def call(self, method, path, **kw):
        return ts.http(self.server, method, path, **kw)

    def load(self, name, text):
        return self.apply(self.server, name, text)

    def top3(self, name):
        r = self.call("POST", f"/v2/models/{name}/infer", json_body=ts.digits_v2_body())
        self.assertEqual(r.status_code, 200, r.text)
        return r.json()["outputs"][0]["data"]

    def events(self, model=None, **query):
        q = dict(query)
        if model:
            q["model"] = model
        r = self.call("GET", "/v2/events?" + "&".join(f"{k}={v}" for k, v in q.items()))
        self.assertEqual(r.status_code, 200, r.text)
        return r.json()

    def test_applied_version_comes_back_from_the_store_after_kill_9(self):
        self.start()
        r = self.load("digits", descriptor("digits", self.model, self.labels))
        self.assertEqual(r.status_code, 200, r.text)
        before = self.top3("digits")
        self.assertEqual(len(before), 3)
        ls = subprocess.run([ts.MCPCTL_BIN, "store", "ls", "--store", self.store, "--json"], capture_output=True,
                            timeout=60)
        self.assertEqual(ls.returncode, 0, ls.stderr.decode())
        self.assertEqual([v["ref"] for v in json.loads(ls.stdout)], ["digits:v1.0.0"])
        self.kill9()
        # The version's files come from the store now: the originals may go.
        os.unlink(self.model)
        os.unlink(self.labels)
        self.start()
        self.assertIn("digits:v1.0.0 restored", self.server.stderr_text())
        self.assertEqual(self.call("GET", "/v2/models/digits/ready").status_code, 200)
        self.assertEqual(self.top3("digits"), before, "the restored version answers as the applied one did")
        meta = self.call("GET", "/v2/models/digits").json()
        self.assertEqual(meta["versions"], ["v1.0.0"])
        ev = self.events("digits")
        self.assertEqual([(e["action"], e["target"], e["outcome"]) for e in ev],
                         [("apply", "digits:v1.0.0", "ok"), ("restore", "digits:v1.0.0", "ok")])
        self.assertTrue(all(e["time_ms"] > 1.7e12 and e["id"] > 0 for e in ev), ev)
        # mcpctl reads the same log.
        p = subprocess.run([ts.MCPCTL_BIN, "events", "digits", "--server", self.server.url, "--json"],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        lines = [json.loads(x) for x in p.stdout.decode().splitlines()]
        self.assertEqual([x["action"] for x in lines], ["apply", "restore"])
        p = subprocess.run([ts.MCPCTL_BIN, "events", "--server", self.server.url], capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        self.assertIn("apply", p.stdout.decode())
        self.assertIn("digits:v1.0.0", p.stdout.decode())
        # The store verifies after all that.
        v = subprocess.run([ts.MCPCTL_BIN, "store", "verify", "--store", self.store], capture_output=True, timeout=60)
        self.assertEqual(v.returncode, 0, v.stdout.decode() + v.stderr.decode())

    def test_unloaded_model_stays_unloaded(self):
        self.start()
        self.assertEqual(self.load("digits", descriptor("digits", self.model)).status_code, 200)
        r = self.call("POST", "/v2/repository/models/digits/unload")
        self.assertEqual(r.status_code, 200, r.text)
        self.kill9()
        self.start()
        self.assertNotEqual(self.call("GET", "/v2/models/digits/ready").status_code, 200)
        self.assertEqual([e["action"] for e in self.events("digits")], ["apply", "unload"])

    def test_failed_apply_is_an_event_without_host_paths(self):
        self.start()
        r = self.load("ghost", descriptor("ghost", os.path.join(self.models, "missing.onnx")))
        self.assertNotEqual(r.status_code, 200)
        ev = self.events("ghost")
        self.assertEqual([(e["action"], e["outcome"]) for e in ev], [("apply", "failed")])
        self.assertIn("missing.onnx", ev[0]["reason"])
        self.assertNotIn(self.tmp, ev[0]["reason"])
        self.kill9()
        self.start()
        self.assertEqual(self.call("GET", "/v2/models/ghost").status_code, 404)

    def test_events_follow(self):
        """mcpctl events --follow prints events as they happen."""
        import queue
        import threading
        self.start()
        p = subprocess.Popen([ts.MCPCTL_BIN, "events", "digits", "--follow", "--json", "--server", self.server.url],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        lines = queue.Queue()
        reader = threading.Thread(target=lambda: [lines.put(x) for x in p.stdout], daemon=True)
        reader.start()
        try:
            self.assertEqual(self.load("digits", descriptor("digits", self.model)).status_code, 200)
            first = json.loads(lines.get(timeout=30))
            self.assertEqual(first["action"], "apply")
            self.assertEqual(self.call("POST", "/v2/repository/models/digits/unload").status_code, 200)
            second = json.loads(lines.get(timeout=30))
            self.assertEqual(second["action"], "unload")
            self.assertGreater(second["id"], first["id"])
            self.assertIsNone(p.poll(), "--follow keeps running")
        finally:
            p.kill()
            p.wait(30)
            reader.join(10)

    def test_event_queries_checked(self):
        self.start()
        self.assertEqual(self.load("digits", descriptor("digits", self.model)).status_code, 200)
        self.assertEqual(self.load("digits", descriptor("digits", self.model, version="v1.1.0")).status_code, 200)
        ev = self.events()
        self.assertEqual(len(ev), 2)
        self.assertEqual(self.events(after=ev[0]["id"]), ev[1:])
        self.assertEqual(len(self.events(limit=1)), 1)
        for q in ("after=-1", "limit=0", "limit=5000", "after=abc", "model=../x", "model=a%20b"):
            r = self.call("GET", "/v2/events?" + q)
            ts.error_message(self, r, 400)
        r = self.call("GET", "/v2/events", headers={"Origin": "http://evil.example"})
        ts.error_message(self, r, 403)


class StoreCrashTests(ts.TempModelsTestCase):
    """kill -9 at 20 different moments while versions are applied back to
    back: after each, the store verifies (every blob's bytes match its
    name: no partial blob), the catalog passes SQLite's integrity check and
    names only manifests the store holds, and a restart serves the version
    the catalog says is current, answering correctly."""

    KILLS = 20

    def test_kill_9_during_applies(self):
        import random
        import sqlite3
        import threading
        import time
        models = self.models
        labels = os.path.join(models, "labels.txt")
        with open(labels, "w") as f:
            f.write("".join(f"digit {i}\n" for i in range(10)))
        store = os.path.join(self.tmp, "store")
        want_top1 = int(ts.mcpctl_run(ts.DIGITS, input=ts.samples()[0])["probabilities"].argmax())
        rng = random.Random(20261202)
        applied = 0
        mid_apply = 0  # kills that landed while a load call was in flight
        in_flight = threading.Event()
        for kill in range(self.KILLS):
            server = self.start("--model-root", models, "--store", store)
            stop = threading.Event()

            def apply_loop(srv=server, base=kill * 1000):
                nonlocal applied
                i = 0
                while not stop.is_set():
                    text = descriptor("digits", os.path.join(models, "digits.onnx"), labels if i % 2 else None,
                                      version=f"v1.{base + i}.0")
                    in_flight.set()
                    try:
                        r = ts.http(srv, "POST", "/v2/repository/models/digits/load",
                                    json_body={"parameters": {"config": text}}, timeout=30)
                        if r.status_code == 200:
                            applied += 1
                    except Exception:
                        return  # the server is gone (in_flight stays set)
                    in_flight.clear()
                    i += 1

            in_flight.clear()
            t = threading.Thread(target=apply_loop, daemon=True)
            t.start()
            # A different moment each time: 20 ms steps plus jitter.
            time.sleep(0.02 * kill + rng.uniform(0, 0.02))
            if in_flight.is_set():
                mid_apply += 1
            server.kill()
            server = None
            stop.set()
            t.join(60)
            v = subprocess.run([ts.MCPCTL_BIN, "store", "verify", "--store", store, "--json"], capture_output=True,
                               timeout=120)
            self.assertEqual(v.returncode, 0, f"kill {kill}: {v.stdout.decode()} {v.stderr.decode()}")
            report = json.loads(v.stdout)
            self.assertEqual(report["problems"], 0, report)
            db = sqlite3.connect(os.path.join(store, "catalog.db"))
            try:
                self.assertEqual(db.execute("PRAGMA integrity_check").fetchone()[0], "ok", f"kill {kill}")
                for (manifest,) in db.execute("SELECT manifest FROM versions"):
                    path = os.path.join(store, "blobs", "sha256", manifest.split(":", 1)[1])
                    self.assertTrue(os.path.isfile(path), f"kill {kill}: the catalog names {manifest}, not stored")
                row = db.execute("SELECT desired, current FROM models WHERE name = 'digits'").fetchone()
            finally:
                db.close()
            server = self.start("--model-root", models, "--store", store)
            if row and row[0] == "loaded":
                meta = ts.http(server, "GET", "/v2/models/digits")
                self.assertEqual(meta.status_code, 200, f"kill {kill}: {server.stderr_text()}")
                self.assertEqual(meta.json()["versions"], [row[1]], f"kill {kill}")
                r = ts.http(server, "POST", "/v2/models/digits/infer", json_body=ts.digits_v2_body())
                self.assertEqual(r.status_code, 200, r.text)
                outs = {o["name"]: o for o in r.json()["outputs"]}
                if "label" in outs:
                    self.assertEqual(outs["label"]["data"], [want_top1], f"kill {kill}")
                else:
                    probs = outs["probabilities"]["data"]
                    self.assertEqual(probs.index(max(probs)), want_top1, f"kill {kill}")
            server.stop()
            server = None
        self.assertGreater(applied, self.KILLS, "the kills should land among applies")
        self.assertGreaterEqual(mid_apply, self.KILLS // 2, "most kills should land in the middle of an apply")


class StoreTokenTests(ts.TempModelsTestCase):
    """The event log is a management call: the admin token when the server
    has one; a server without --store has none; a --store that is not a
    store is refused at start."""

    def test_events_need_the_token(self):
        token = ts.write_token_file(self.tmp, "tok-0123456789abcdef")
        server = self.start("--model-path", ts.DIGITS, "--store", os.path.join(self.tmp, "store"),
                            "--admin-token-file", token)
        ts.error_message(self, ts.http(server, "GET", "/v2/events"), 401)
        r = ts.http(server, "GET", "/v2/events", headers={"Authorization": "Bearer tok-0123456789abcdef"})
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(r.json(), [])
        server.stop()
        server = self.start("--model-path", ts.DIGITS)
        msg = ts.error_message(self, ts.http(server, "GET", "/v2/events"), 404)
        self.assertIn("--store", msg)

    def test_store_that_is_not_a_folder_refused(self):
        """--store naming a file, or a folder holding a layout of another
        version, stops the server at start with the reason."""
        plain = os.path.join(self.tmp, "plain")
        with open(plain, "w") as f:
            f.write("x")
        odd = os.path.join(self.tmp, "odd")
        os.mkdir(odd)
        with open(os.path.join(odd, "oci-layout"), "w") as f:
            f.write('{"imageLayoutVersion":"9.9.9"}')
        for store, want in ((plain, "is not a folder"), (odd, "imageLayoutVersion")):
            p = subprocess.run([ts.SERVER_BIN, "--model-path", ts.DIGITS, "--port", "0", "--store", store],
                               capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(want, p.stderr.decode())
            self.assertNotIn("listening", p.stderr.decode())


if __name__ == "__main__":
    unittest.main()
