#!/usr/bin/python3
"""The live status page (issue 13), end to end.

GET / serves a page compiled into the server; it refreshes itself from
GET /v2/status. StatusHttpTests checks both over HTTP: the headers (CSP,
nosniff, content types, Cache-Control), HEAD, 404 for unknown assets, and
that the JSON's counts are the ones /metrics and /v2/models/{m}/stats report
after a known number of requests. StatusBrowserTests loads the page in
headless Chromium (Debian chromium + chromium-driver + python3-selenium)
against a live server and reads the rendered DOM: what it shows must be the
server's JSON, it must refresh, show an error banner when the server goes
away, and show hostile strings (a load failure reason carrying
<script>alert(1)</script> and <img src=x onerror=...>; model names cannot
hold '<') as text, with no injected element and no alert.

Everything runs on 127.0.0.1; Chromium resolves no other host. Each test
starts its own server and browser and stops both in tearDown. Every wait is
bounded.

Run by hand (from tests/e2e):
  MCP_SERVER_BIN=../../build/bin/mcp2026-server MCPCTL_BIN=../../build/bin/mcpctl \\
    python3 -m unittest -v test_status_page
"""
import json
import os
import re
import shutil
import sys
import tempfile
import time
import unittest

import requests

import test_server as ts

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
ASSETS = [("/", "text/html"), ("/status/status.css", "text/css"), ("/status/status.js", "text/javascript")]
SCRIPT_REASON = "<script>alert(1)</script>"
IMG_REASON = "<img src=x onerror=alert(1)>"
BROWSER_TIMEOUT_S = 30  # page loads and refreshes (the page refreshes every 0.25 s in these tests)


def setUpModule():
    ts.setUpModule()


def tearDownModule():
    ts.tearDownModule()


def fill_repository(repo):
    """Two ready models on the demo model, and two whose load fails with a
    reason that names a file called like markup (the most hostile string a
    client of the page can be shown: model names allow only A-Z a-z 0-9 . _ -,
    versions are semver)."""
    shutil.copy(ts.DIGITS, os.path.join(repo, "digits.onnx"))
    for name, version in (("digits", "v1.0.0"), ("digits2", "v2.1.0")):
        with open(os.path.join(repo, name + ".yaml"), "w") as f:
            f.write(f"name: {name}\nversion: {version}\nformat: onnx\npath: digits.onnx\n")
    # "<script>alert(1)</script>.onnx" is the file "script>.onnx" in the folder "<script>alert(1)<".
    os.mkdir(os.path.join(repo, "<script>alert(1)<"))
    for name, file in (("xss_script", SCRIPT_REASON + ".onnx"), ("xss_img", IMG_REASON + ".onnx")):
        with open(os.path.join(repo, file), "wb") as f:
            f.write(b"not an ONNX model")
        with open(os.path.join(repo, name + ".yaml"), "w") as f:
            f.write(f"name: {name}\nversion: v1.0.0\nformat: onnx\npath: {json.dumps(file)}\n")


def histogram_quantile(q, bounds, cumulative):
    """Prometheus's histogram_quantile over cumulative bucket counts (the last +Inf)."""
    total = cumulative[-1]
    if total == 0:
        return None
    rank = q * total
    for b, upper in enumerate(bounds):
        if cumulative[b] >= rank:
            below, lower = (cumulative[b - 1], bounds[b - 1]) if b else (0, 0.0)
            return lower + (upper - lower) * (rank - below) / (cumulative[b] - below)
    return bounds[-1]


class StatusTestCase(unittest.TestCase):
    """A server on a fresh repository (fill_repository) per test, stopped in tearDown."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mcp-e2e-status-")
        self.repo = os.path.join(self.tmp, "repo")
        os.mkdir(self.repo)
        fill_repository(self.repo)
        self.server = ts.Server("--model-repository", self.repo)
        self.server.start()

    server_killed = False  # a test that kills the server on purpose says so

    def tearDown(self):
        rc = self.server.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)
        if rc != 0 and not self.server_killed:
            raise AssertionError(f"server exited with status {rc} on SIGTERM, not 0\n{self.server.stderr_text()}")

    def call(self, method, path, **kw):
        return ts.http(self.server, method, path, **kw)

    def status(self):
        r = self.call("GET", "/v2/status")
        self.assertEqual(r.status_code, 200, r.text[:300])
        return r.json()

    def infer(self, model, n, good=True):
        body = ts.digits_v2_body() if good else {"inputs": [{"name": "input", "shape": [1, 3], "datatype": "FP32",
                                                             "data": [1.0, 2.0, 3.0]}]}
        for _ in range(n):
            r = self.call("POST", f"/v2/models/{model}/infer", json_body=body)
            self.assertEqual(r.status_code, 200 if good else 400, r.text[:300])


class StatusHttpTests(StatusTestCase):
    def test_page_and_assets(self):
        for path, ctype in ASSETS:
            with self.subTest(path=path):
                plain = {"Accept-Encoding": "identity"}
                r = self.call("GET", path, headers=plain)
                self.assertEqual(r.status_code, 200)
                essence, _, params = r.headers["Content-Type"].partition(";")
                self.assertEqual(essence.strip(), ctype)
                self.assertEqual(params.strip().lower(), "charset=utf-8")
                self.assertEqual(r.headers.get("Content-Security-Policy"), CSP)
                self.assertEqual(r.headers.get("X-Content-Type-Options"), "nosniff")
                self.assertEqual(r.headers.get("Cache-Control"), "no-cache")
                self.assertGreater(len(r.content), 100)
                self.assertLess(len(r.content), 16384, "assets stay small")
                text = r.content.decode("utf-8")
                # HEAD: the same headers, no body.
                h = self.call("HEAD", path, headers=plain, validate=False)
                self.assertEqual(h.status_code, 200)
                self.assertEqual(h.content, b"")
                for k in ("Content-Type", "Content-Security-Policy", "X-Content-Type-Options", "Cache-Control"):
                    self.assertEqual(h.headers.get(k), r.headers.get(k), k)
                self.assertEqual(h.headers.get("Content-Length"), str(len(r.content)))
                # Compressed for clients that take gzip, with the same headers.
                g = self.call("GET", path, headers={"Accept-Encoding": "gzip"})
                self.assertEqual(g.content.decode("utf-8"), text)
                self.assertEqual(g.headers.get("Content-Security-Policy"), CSP)
                if path == "/":
                    # Only relative URLs of this server, no inline script or style.
                    refs = re.findall(r'(?:src|href)="([^"]*)"', text)
                    self.assertEqual(sorted(refs), ["status/status.css", "status/status.js"])
                    self.assertNotRegex(text, r"<script[^>]*>[^<]")
                    self.assertNotIn("style=", text)
                    self.assertNotRegex(text, r"\son[a-z]+=")
                if path.endswith(".js"):
                    # Data reaches the DOM as text only.
                    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                                 "new Function", "://"):
                        self.assertFalse(sink in text, f"{path} uses {sink}")
                    self.assertIn('fetch("v2/status"', text)

    def test_unknown_paths(self):
        for path in ("/status/nope.js", "/status/", "/status", "/index.html", "/status/status.css/x",
                     "/v2/status/x"):
            with self.subTest(path=path):
                r = self.call("GET", path, validate=False)  # not in the OpenAPI document: no such route
                self.assertEqual(r.status_code, 404, r.text[:200])
                ts.error_message(self, r, 404)
                self.assertNotIn("Content-Security-Policy", r.headers)
        r = self.call("POST", "/", validate=False)
        self.assertEqual(r.status_code, 405)
        self.assertEqual(r.headers.get("Allow"), "GET, HEAD")

    def test_status_json(self):
        self.infer("digits", 7)
        self.infer("digits", 3, good=False)
        self.infer("digits2", 2)
        for _ in range(2):  # unknown names: counted in the totals, never shown as a model
            r = self.call("POST", "/v2/models/nosuch/infer", json_body=ts.digits_v2_body())
            self.assertEqual(r.status_code, 404)

        r = self.call("GET", "/v2/status")  # validated against the OpenAPI schema by ts.http
        self.assertEqual(r.status_code, 200)
        self.assertTrue(r.headers["Content-Type"].startswith("application/json"))
        self.assertEqual(r.headers.get("X-Content-Type-Options"), "nosniff")
        self.assertEqual(r.headers.get("Cache-Control"), "no-store")
        self.assertNotIn(self.tmp, r.text, "a host path in the status document")
        doc = r.json()
        _, samples = ts.get_metrics(self, self.server)
        stats = {m: self.call("GET", f"/v2/models/{m}/stats").json()["model_stats"][0] for m in ("digits", "digits2")}
        index = self.call("POST", "/v2/repository/index").json()

        # The models as the repository has them, sorted by name, with their states.
        self.assertEqual([m["name"] for m in doc["models"]], sorted(e["name"] for e in index))
        self.assertEqual({m["name"]: m["state"] for m in doc["models"]}, {e["name"]: e["state"] for e in index})
        self.assertEqual(doc["server"]["name"], "mcp2026")
        self.assertTrue(doc["server"]["ready"])

        bounds = doc["latency_bounds_s"]
        models = {m["name"]: m for m in doc["models"]}
        for name, version, ok, bad in (("digits", "v1.0.0", 7, 3), ("digits2", "v2.1.0", 2, 0)):
            with self.subTest(model=name):
                m = models[name]
                self.assertEqual(m["rollout"], {"primary": version, "canary": None, "shadow": None, "previous": None})
                self.assertEqual(len(m["versions"]), 1)
                v = m["versions"][0]
                self.assertEqual((v["version"], v["role"], v["state"]), (version, "primary", "READY"))
                self.assertEqual(v["requests"], ok + bad)
                self.assertEqual(v["errors"], bad)
                self.assertEqual(v["inference_count"], ok)
                self.assertIsNone(v["drift"])
                self.assertGreater(v["memory_bytes"], 0)
                self.assertEqual(v["queue_depth"], 0)
                # The same figures as /metrics and the statistics extension.
                labels = {"model": name, "version": version}
                self.assertEqual(v["requests"], ts.metric_sum(samples, "mcp_requests_total", **labels))
                errors = sum(val for n, l, val in samples if n == "mcp_requests_total" and l["model"] == name
                             and int(l["code"]) >= 400)
                self.assertEqual(v["errors"], errors)
                self.assertEqual(v["inference_count"], stats[name]["inference_count"])
                self.assertEqual(stats[name]["version"], version)
                lat = v["latency"]
                self.assertEqual(lat["count"], ts.metric_sum(samples, "mcp_request_duration_seconds_count", **labels))
                self.assertEqual(lat["count"], ok)
                buckets = sorted(((float(l["le"]), val) for n, l, val in samples
                                  if n == "mcp_request_duration_seconds_bucket" and l["model"] == name),
                                 key=lambda t: t[0])
                self.assertEqual([b for b, _ in buckets[:-1]], bounds)
                self.assertEqual([int(c) for _, c in buckets], lat["buckets"])
                for q, key in ((0.5, "p50_s"), (0.99, "p99_s")):
                    want = histogram_quantile(q, bounds, lat["buckets"])
                    self.assertAlmostEqual(lat[key], want, delta=want * 1e-6)
                    self.assertLessEqual(lat[key], bounds[-1])
                self.assertLessEqual(lat["p50_s"], lat["p99_s"])

        for name in ("xss_script", "xss_img"):
            m = models[name]
            self.assertEqual(m["state"], "UNAVAILABLE")
            self.assertIsNone(m["rollout"])
            self.assertIn(SCRIPT_REASON if name == "xss_script" else IMG_REASON, m["reason"])
            self.assertEqual([(v["version"], v["state"], v["requests"]) for v in m["versions"]],
                             [("v1.0.0", "UNAVAILABLE", 0)])

        t = doc["totals"]
        self.assertEqual(t["requests"], ts.metric_sum(samples, "mcp_requests_total"))
        self.assertEqual(t["requests"], 14)
        self.assertEqual(t["errors"], sum(val for n, l, val in samples
                                          if n == "mcp_requests_total" and int(l["code"]) >= 400))
        self.assertEqual(t["errors"], 5)
        self.assertEqual(t["models_loaded"], ts.metric_sum(samples, "mcp_models_loaded"))
        self.assertEqual(t["model_memory_bytes"], ts.metric_sum(samples, "mcp_model_memory_bytes"))
        self.assertEqual(t["queue_depth"], 0)
        self.assertGreater(t["process_resident_bytes"], 0)

        # The monotonic snapshot clock moves on; HEAD answers without a body.
        self.assertGreater(self.status()["server"]["snapshot_ns"], doc["server"]["snapshot_ns"])
        h = self.call("HEAD", "/v2/status", validate=False)
        self.assertEqual((h.status_code, h.content), (200, b""))
        self.assertEqual(h.headers.get("Cache-Control"), "no-store")

    def test_rollout_roles(self):
        """A canary and a shadow beside the primary: every version with its
        role and its own counts, the rollout as /v2/models/{m}/rollout has it."""
        base = "name: digits\nformat: onnx\npath: digits.onnx\n"
        for version, section in (("v1.1.0", "canary: {version: v1.1.0, weight: 30}"),
                                 ("v1.2.0", "shadow: {version: v1.2.0, sample: 0.5}")):
            config = f"{base}version: {version}\nrollout:\n  {section}\n"
            r = self.call("POST", "/v2/repository/models/digits/load", json_body={"parameters": {"config": config}})
            self.assertEqual(r.status_code, 200, r.text)
        self.infer("digits", 40)
        rollout = self.call("GET", "/v2/models/digits/rollout").json()
        doc = self.status()
        _, samples = ts.get_metrics(self, self.server)
        m = {m["name"]: m for m in doc["models"]}["digits"]
        self.assertEqual([(v["version"], v["role"], v["state"]) for v in m["versions"]],
                         [("v1.0.0", "primary", "READY"), ("v1.1.0", "canary", "READY"), ("v1.2.0", "shadow", "READY")])
        self.assertEqual(m["rollout"], {"primary": rollout["primary"], "canary": dict(rollout["canary"], stopped=False),
                                        "shadow": dict(rollout["shadow"], stopped=False), "previous": None})
        for v in m["versions"]:
            with self.subTest(version=v["version"]):
                self.assertEqual(v["requests"], ts.metric_sum(samples, "mcp_requests_total", model="digits",
                                                              version=v["version"]))
                self.assertGreater(v["memory_bytes"], 0)
        by_role = {v["role"]: v for v in m["versions"]}
        self.assertEqual(by_role["primary"]["requests"] + by_role["canary"]["requests"], 40)
        self.assertGreater(by_role["canary"]["requests"], 0)


# ---------------------------------------------------------------------------
# the page in a browser
# ---------------------------------------------------------------------------

def import_selenium():
    """Debian's python3-selenium; a Python from elsewhere (pyenv) finds it in
    Debian's dist-packages, appended so that it shadows nothing."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        sys.path.append("/usr/lib/python3/dist-packages")
    from selenium import webdriver
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.chrome.service import Service
    return webdriver, Service, NoAlertPresentException


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


class StatusBrowserTests(StatusTestCase):
    def setUp(self):
        missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
        try:
            self.webdriver, Service, self.NoAlert = import_selenium()
        except ImportError as e:
            missing.append(f"python3-selenium ({e})")
        if missing:
            self.skipTest(f"no headless browser: {', '.join(missing)} missing "
                          f"(Debian chromium chromium-driver python3-selenium; scripts/install-deps.sh)")
        super().setUp()
        self.driver = None
        self.profile = tempfile.mkdtemp(prefix="mcp-e2e-chromium-")
        opts = self.webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for arg in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage", f"--user-data-dir={self.profile}",
                    "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--disable-extensions", "--disable-default-apps",
                    "--disable-domain-reliability", "--no-pings", "--window-size=1400,900",
                    # No host but loopback resolves, and no proxy is asked.
                    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
                    "--no-proxy-server"):
            opts.add_argument(arg)
        if os.geteuid() == 0:
            opts.add_argument("--no-sandbox")  # Chromium's sandbox refuses to run as root
        self.service = Service(CHROMEDRIVER, log_path=os.path.join(self.tmp, "chromedriver.log"))
        try:
            self.driver = self.webdriver.Chrome(service=self.service, options=opts)
        except Exception as e:
            log = ""
            try:
                with open(os.path.join(self.tmp, "chromedriver.log"), errors="replace") as f:
                    log = f.read()[-3000:]
            except OSError:
                pass
            self.tearDown()
            raise AssertionError(f"Chromium did not start: {type(e).__name__}: {e}\nchromedriver log:\n{log}")
        self.driver.set_page_load_timeout(BROWSER_TIMEOUT_S)
        self.driver.set_script_timeout(BROWSER_TIMEOUT_S)

    def tearDown(self):
        if getattr(self, "driver", None):
            try:
                self.driver.quit()
            except Exception:
                pass
            self.driver = None
        service = getattr(self, "service", None)
        if service and service.process and service.process.poll() is None:
            service.process.kill()  # quit() failed: chromedriver and its browser go with it
        if getattr(self, "profile", None):
            shutil.rmtree(self.profile, ignore_errors=True)
        if getattr(self, "server", None):
            super().tearDown()

    # -- helpers --

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def refreshes(self):
        return int(self.js("return document.getElementById('status').dataset.refreshes"))

    def wait(self, predicate, what, timeout=BROWSER_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = predicate()
            if v:
                return v
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")

    def open_page(self):
        self.driver.get(self.server.url + "/?refresh=0.25")
        self.wait(lambda: self.refreshes() >= 1, "the page's first refresh")

    def settle(self):
        """Waits for two more refreshes: the second began after the first
        ended, which was after every request the test made before calling,
        so the table shows every one of them."""
        start = self.refreshes()
        self.wait(lambda: self.refreshes() >= start + 2, "two refreshes")

    def rows(self):
        """(model, version, role, state, requests, errors) of every version row in the DOM."""
        return [tuple(r) for r in self.js("""
            return Array.from(document.querySelectorAll('#rows tr[data-version]')).map(tr =>
              ['model', 'version', 'role', 'state', 'requests', 'errors']
                .map(c => tr.querySelector('td.' + c).textContent));
        """)]

    def expected_rows(self, doc):
        return [(m["name"], v["version"], v["role"], v["state"], str(v["requests"]), str(v["errors"]))
                for m in doc["models"] for v in m["versions"]]

    def screenshot(self, name):
        folder = os.environ.get("TMPDIR") or tempfile.gettempdir()
        path = os.path.join(folder, name)
        self.driver.save_screenshot(path)
        print(f"\n  screenshot: {path}", file=sys.stderr)
        return path

    def assert_no_alert(self):
        try:
            text = self.driver.switch_to.alert.text
        except self.NoAlert:
            return
        self.fail(f"an alert fired: {text!r}")

    # -- tests --

    def test_page_shows_the_servers_figures(self):
        self.open_page()
        self.assertEqual(self.js("return document.title"), "mcp2026 status")
        for round_, n in enumerate((5, 3)):
            self.infer("digits", n)
            self.infer("digits", 1, good=False)
            self.infer("digits2", round_ + 1)
            self.settle()
            doc = self.status()  # no inference since the page's last refresh: the same counts
            self.assertEqual(self.rows(), self.expected_rows(doc))
        digits = [r for r in self.rows() if r[0] == "digits"][0]
        self.assertEqual(digits[4:], ("10", "2"))
        self.assertTrue(self.js("return document.getElementById('error').hidden"))
        self.assertNotEqual(self.js("return document.getElementById('last-updated').textContent"), "never")
        self.assertEqual(self.js("return document.getElementById('t-requests').textContent"),
                         str(doc["totals"]["requests"]))
        # After two documents every rate is a number, p50/p99 a duration; drift is "—" (null).
        cells = self.js("""
            const tr = document.querySelector('#rows tr[data-model="digits"]');
            return ['request-rate', 'error-rate', 'drift'].map(c => tr.querySelector('td.' + c).textContent)
              .concat(Array.from(tr.querySelectorAll('td.num')).slice(4, 6).map(td => td.textContent));
        """)
        self.assertRegex(cells[0], r"^\d+\.\d$")
        self.assertRegex(cells[1], r"^\d+\.\d$")
        self.assertEqual(cells[2], "—")
        for c in cells[3:]:
            self.assertRegex(c, r"^\d+(\.\d+)? (µs|ms|s)$")
        # Nothing came from anywhere but this server.
        urls = self.js("return [location.href].concat(performance.getEntriesByType('resource').map(e => e.name))")
        self.assertTrue(all(u.startswith(self.server.url + "/") for u in urls), urls)
        self.screenshot("status_page.png")

    def test_drift_display(self):
        """The server sends "drift": null until a drift detector exists; the
        page shows "—" for null and, for {"score", "threshold", "drifted"},
        the score with a red marker when drifted. The objects are put into
        the page's own fetch answers here (the script calls window.fetch on
        every refresh)."""
        self.open_page()
        self.js("""
            const real = window.fetch;
            window.fetch = async function (...args) {
              const doc = await (await real.apply(this, args)).json();
              for (const m of doc.models) for (const v of m.versions) {
                if (m.name === 'digits') v.drift = {score: 0.4213, threshold: 0.3, drifted: true};
                if (m.name === 'digits2') v.drift = {score: 0.05, threshold: 0.3, drifted: false};
              }
              return new Response(JSON.stringify(doc), {status: 200, headers: {'Content-Type': 'application/json'}});
            };""")
        self.settle()
        drift = dict(self.js("""
            return Array.from(document.querySelectorAll('#rows tr[data-version]')).map(tr => {
              const td = tr.querySelector('td.drift'), mark = td.querySelector('.drifted');
              return [tr.dataset.model, [td.textContent, mark ? getComputedStyle(mark).color : null]];
            });"""))
        self.assertEqual(drift["digits"][0], "0.421 ●")
        self.assertEqual(drift["digits"][1], "rgb(198, 40, 40)")  # the red of status.css
        self.assertEqual(drift["digits2"], ["0.0500", None])
        self.assertEqual(drift["xss_img"], ["—", None])
        self.screenshot("status_page_drift.png")

    def test_error_banner_when_the_server_goes(self):
        self.open_page()
        self.assertTrue(self.js("return document.getElementById('error').hidden"))
        self.server_killed = True
        self.server.kill()
        banner = self.wait(lambda: self.js("""
            const b = document.getElementById('error');
            return b.hidden ? null : b.textContent;"""), "the error banner")
        self.assertIn("Could not refresh", banner)
        self.assertIn("last refresh that worked", banner)
        self.assertTrue(self.rows(), "the table keeps the last figures")
        self.screenshot("status_page_error.png")

    def test_hostile_strings_are_text(self):
        self.open_page()
        # Any alert from here on sets a mark (WebDriver's script is not
        # bound by the page's CSP); the table is rebuilt on every refresh,
        # so markup that got in would run again.
        self.js("window.alert = function (m) { document.documentElement.dataset.alerted = String(m); };")
        self.settle()
        reasons = dict(self.js("""
            return Array.from(document.querySelectorAll('#rows tr.reason-row')).map(tr =>
              [tr.dataset.model, tr.querySelector('td.reason').textContent]);"""))
        self.assertIn(SCRIPT_REASON, reasons.get("xss_script", ""))
        self.assertIn(IMG_REASON, reasons.get("xss_img", ""))
        doc = self.status()
        for m in doc["models"]:
            if m["reason"]:
                self.assertEqual(reasons.get(m["name"]), m["reason"])
        self.assertEqual(self.rows(), self.expected_rows(doc))
        found = self.js("""
            return {
              scripts: Array.from(document.scripts).map(s => s.getAttribute('src')),
              imgs: document.querySelectorAll('img').length,
              inTable: document.querySelectorAll('#rows *:not(tr):not(td):not(span)').length,
              handlers: Array.from(document.querySelectorAll('*')).filter(e =>
                Array.from(e.attributes).some(a => a.name.startsWith('on'))).length,
              alerted: document.documentElement.dataset.alerted || null,
            };""")
        self.assertEqual(found, {"scripts": ["status/status.js"], "imgs": 0, "inTable": 0, "handlers": 0,
                                 "alerted": None})
        self.assert_no_alert()
        self.screenshot("status_page_hostile.png")


if __name__ == "__main__":
    unittest.main()
