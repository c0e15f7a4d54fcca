#!/usr/bin/python3
"""Observability end to end (issue 13): a real Prometheus scrapes a real
mcp2026-server, loads deploy/prometheus/alerts.yml, and answers every query
of deploy/grafana/mcp2026.json.

Debian's prometheus package gives /usr/bin/prometheus and /usr/bin/promtool.
The server runs the demo digits model with HTTP and gRPC on 127.0.0.1; a
Prometheus configured from deploy/prometheus/prometheus.yml (intervals cut to
1 s, the target pointed at the server) listens on 127.0.0.1 too, with a
temporary TSDB, no Alertmanager and no remote storage, so nothing leaves the
machine. Every wait is a bounded loop; nothing asserts on wall-clock time.

Run by ctest (tests/e2e/CMakeLists.txt), or by hand:
  MCP_SERVER_BIN=build/bin/mcp2026-server MCPCTL_BIN=build/bin/mcpctl \\
    /usr/bin/python3 -m unittest -v test_observe.PrometheusTests
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

import numpy as np
import requests
import yaml

import test_grpc as tg
import test_server as ts
from test_server import DIGITS, SOURCE_DIR, Server, error_message, get_metrics, http, metric_sum, samples

PROMETHEUS_BIN = "/usr/bin/prometheus"
PROMTOOL_BIN = "/usr/bin/promtool"
DEPLOY_DIR = os.path.join(SOURCE_DIR, "deploy")
PROM_CONFIG = os.path.join(DEPLOY_DIR, "prometheus", "prometheus.yml")
ALERTS = os.path.join(DEPLOY_DIR, "prometheus", "alerts.yml")
DASHBOARD = os.path.join(DEPLOY_DIR, "grafana", "mcp2026.json")
JOB = "mcp2026"                 # the job of deploy/prometheus/prometheus.yml
MODEL = "digits"

PROM_START_TIMEOUT_S = 30       # Prometheus up and answering /-/ready
SCRAPE_WAIT_S = 30              # a scrape that shows what the test waits for
RULES_WAIT_S = 30               # every rule evaluated once
API_TIMEOUT_S = 10              # one Prometheus API exchange
PROMTOOL_TIMEOUT_S = 60
POLL_S = 0.1

# Written by the drift monitor, which lands separately: while /metrics lacks
# them, the dashboard check skips these two names (reported as skipped
# subtests) instead of failing. Any other name missing from /metrics fails.
DRIFT_FAMILIES = {
    "mcp_monitor_drift_score": {"model", "version", "output", "statistic"},
    "mcp_monitor_drift_threshold": {"model", "version"},
}

# Per model version gauges; the dashboard's queue and memory panels and the
# queue saturation alert read them, so /metrics must have them (no skipping).
VERSION_FAMILIES = {
    "mcp_model_queue_depth": {"model", "version"},
    "mcp_model_queue_capacity": {"model", "version"},
    "mcp_model_resident_bytes": {"model", "version"},
}
# Labels Prometheus or deploy/prometheus/prometheus.yml put on every series.
TARGET_LABELS = {"__name__", "job", "instance", "service"}

# PromQL words that look like metric names but are not.
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
    "quantile", "atan2", "inf", "nan", "start", "end",
}

# Grafana's built-in variables, as a query sees them once Grafana has
# interpolated them; template variables become "all values" (".*": every
# panel uses them with =~).
GRAFANA_BUILTINS = {"__rate_interval": "1m", "__interval": "15s", "__range": "1h", "__range_s": "3600",
                    "__interval_ms": "15000", "__range_ms": "3600000"}


def setUpModule():
    tg.setUpModule()  # test_server's module set-up, and the gRPC stubs
    for b in (PROMETHEUS_BIN, PROMTOOL_BIN):
        if not os.access(b, os.X_OK):
            raise RuntimeError(f"{b}: not an executable (Debian package prometheus)")


def tearDownModule():
    tg.tearDownModule()


def promql_metric_names(expr):
    """Metric names an expression selects (a lexical scan: strings, label
    matchers, ranges and grouping labels removed; function and aggregation
    names excluded)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    names = set()
    e = re.sub(r"\{[^{}]*\}", " ", e)
    e = re.sub(r"\[[^\[\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", r" \1 ", e)
    for m in re.finditer(r"(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", e):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in PROMQL_WORDS:
            continue
        names.add(word)
    return names


def grafana_interpolate(expr, variables):
    def sub(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name in GRAFANA_BUILTINS:
            return GRAFANA_BUILTINS[name]
        if name in variables:
            return ".*"
        raise AssertionError(f"expression uses ${name}, neither a template variable nor a Grafana one: {expr}")
    # ${name}, ${name:format}, [[name]] and $name.
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)", sub, expr)


def dashboard_panels(panels):
    for p in panels:
        yield p
        yield from dashboard_panels(p.get("panels") or [])


def exported_families(text):
    """{family: type} from the # TYPE lines of a /metrics text."""
    out = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            out[parts[2]] = parts[3]
    return out


def series_names(families):
    names = set()
    for name, kind in families.items():
        names.add(name)
        if kind == "histogram":
            names.update(name + s for s in ("_bucket", "_sum", "_count"))
        elif kind == "summary":
            names.update(name + s for s in ("_sum", "_count"))
    return names


class PrometheusTests(unittest.TestCase):
    # Traffic: N HTTP inferences over three protocols, M over gRPC, K invalid.
    HTTP_V2, HTTP_V1, HTTP_SIMPLE, GRPC = 3, 2, 2, 3
    INVALID = {"v2": 1, "simple": 1, "grpc": 1}

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mcp-e2e-observe-")
        self.prom = None
        self.prom_log = None
        self.server = None
        self.channel = None
        # A cleanup, not tearDown: it runs even when setUp fails half way.
        self.addCleanup(self.cleanup)
        self.grpc_port = tg.free_port()
        self.server = Server("--model-path", DIGITS, "--grpc-port", self.grpc_port).start()
        self.channel = tg.grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")
        self.stub = tg.pb_grpc.GRPCInferenceServiceStub(self.channel)
        self.start_prometheus()

    def cleanup(self):
        if self.prom is not None and self.prom.poll() is None:
            self.prom.terminate()
            try:
                self.prom.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.prom.kill()
                self.prom.wait(timeout=15)
        if self.prom_log:
            self.prom_log.close()
        if self.channel is not None:
            self.channel.close()
        rc = self.server.stop() if self.server is not None else 0
        shutil.rmtree(self.tmp, ignore_errors=True)
        if rc != 0:
            self.fail(f"server exited with status {rc} on SIGTERM\n{self.server.stderr_text()}")

    # ---- Prometheus ----

    def prom_stderr(self):
        try:
            with open(os.path.join(self.tmp, "prometheus.log"), errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def write_config(self):
        """deploy/prometheus/prometheus.yml, its intervals cut to 1 s and its
        target pointed at the server under test."""
        with open(PROM_CONFIG) as f:
            cfg = yaml.safe_load(f)
        cfg["global"].update({"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"})
        cfg["rule_files"] = [ALERTS]
        cfg.pop("alerting", None)
        cfg.pop("remote_write", None)
        cfg.pop("remote_read", None)
        jobs = [j for j in cfg["scrape_configs"] if j["job_name"] == JOB]
        self.assertEqual(len(jobs), 1, f"deploy/prometheus/prometheus.yml has no job {JOB!r}")
        jobs[0]["static_configs"] = [{"targets": [f"127.0.0.1:{self.server.port}"],
                                      "labels": (jobs[0]["static_configs"][0].get("labels") or {})}]
        cfg["scrape_configs"] = jobs
        path = os.path.join(self.tmp, "prometheus.yml")
        with open(path, "w") as f:
            yaml.safe_dump(cfg, f)
        return path

    def start_prometheus(self):
        config = self.write_config()
        self.prom_log = open(os.path.join(self.tmp, "prometheus.log"), "wb")
        last = None
        for attempt in range(3):  # a free port taken between the probe and the bind: try another
            port = tg.free_port()
            self.prom_url = f"http://127.0.0.1:{port}"
            self.prom = subprocess.Popen(
                [PROMETHEUS_BIN, f"--config.file={config}",
                 f"--storage.tsdb.path={os.path.join(self.tmp, f'tsdb{attempt}')}",
                 f"--web.listen-address=127.0.0.1:{port}", "--web.max-connections=64",
                 f"--web.console.templates={self.tmp}", f"--web.console.libraries={self.tmp}",
                 "--storage.tsdb.retention.time=1h", "--log.level=warn", "--query.timeout=30s"],
                stdin=subprocess.DEVNULL, stdout=self.prom_log, stderr=self.prom_log)
            for _ in range(int(PROM_START_TIMEOUT_S / POLL_S)):
                if self.prom.poll() is not None:
                    break
                try:
                    r = requests.get(self.prom_url + "/-/ready", timeout=API_TIMEOUT_S)
                    if r.status_code == 200:
                        return
                    last = f"{r.status_code} {r.text[:200]}"
                except requests.ConnectionError as e:
                    last = str(e)
                time.sleep(POLL_S)
            if self.prom.poll() is None:
                break
        self.fail(f"prometheus never became ready (last: {last}; exit status {self.prom.poll()})\n"
                  f"{self.prom_stderr()}")

    def api(self, path, **params):
        r = requests.get(self.prom_url + "/api/v1/" + path, params=params, timeout=API_TIMEOUT_S)
        try:
            body = r.json()
        except ValueError:
            self.fail(f"/api/v1/{path} {params}: {r.status_code} {r.text[:300]}")
        return r.status_code, body

    def query(self, expr, at=None):
        """An instant query that must succeed; returns its result list."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        status, body = self.api("query", **params)
        self.assertEqual((status, body.get("status")), (200, "success"), f"{expr}: {body}")
        return body["data"]["result"]

    def scalar(self, expr, at):
        """The single value of a query that aggregates to one series."""
        result = self.query(expr, at)
        self.assertEqual(len(result), 1, f"{expr}: {result}")
        return float(result[0]["value"][1])

    def wait_until(self, predicate, what, timeout):
        for _ in range(int(timeout / POLL_S)):
            v = predicate()
            if v:
                return v
            self.assertIsNone(self.prom.poll(), "prometheus exited:\n" + self.prom_stderr())
            time.sleep(POLL_S)
        self.fail(f"timed out after {timeout} s waiting for {what}\n{self.prom_stderr()}")

    def target_up(self):
        _, body = self.api("targets", state="active")
        targets = body["data"]["activeTargets"]
        return len(targets) == 1 and targets[0]["health"] == "up" and targets[0]["labels"].get("job") == JOB

    def scrape_after(self, t):
        """Timestamp (s) of the first scrape that started after wall time t."""
        def newer():
            r = self.query(f'timestamp(mcp_models_loaded{{job="{JOB}"}})')
            return r and float(r[0]["value"][1]) > t and float(r[0]["value"][1])
        return self.wait_until(newer, f"a scrape after {t}", SCRAPE_WAIT_S)

    # ---- the server ----

    def promtool(self, *args, stdin=None):
        p = subprocess.run([PROMTOOL_BIN, *args], input=stdin, capture_output=True, timeout=PROMTOOL_TIMEOUT_S)
        return p.returncode, (p.stdout + p.stderr).decode(errors="replace")

    def check_metrics_text(self, what):
        r = http(self.server, "GET", "/metrics")
        self.assertEqual(r.status_code, 200, r.text[:300])
        rc, out = self.promtool("check", "metrics", stdin=r.content)
        self.assertEqual((rc, out.strip()), (0, ""), f"promtool check metrics on /metrics {what}")
        return r.text

    def traffic(self):
        x = samples()[0]
        row = [float(v) for v in x.reshape(-1)]
        for k in range(self.HTTP_V2):
            r = http(self.server, "POST", f"/v2/models/{MODEL}/infer", json_body=ts.digits_v2_body(k % 5))
            self.assertEqual(r.status_code, 200, r.text)
        for _ in range(self.HTTP_V1):
            r = http(self.server, "POST", f"/v1/models/{MODEL}:predict", json_body={"instances": [row]})
            self.assertEqual(r.status_code, 200, r.text)
        for _ in range(self.HTTP_SIMPLE):
            r = http(self.server, "POST", "/v1/infer", json_body={"input": row, "shape": [1, 64]})
            self.assertEqual(r.status_code, 200, r.text)
        for k in range(self.GRPC):
            out = self.stub.ModelInfer(tg.infer_request(MODEL, "input", "FP32", samples()[k], raw=bool(k % 2)),
                                       timeout=ts.HTTP_TIMEOUT_S)
            self.assertEqual(out.model_name, MODEL)
        # Invalid: the wrong shape over each protocol (reason invalid_input).
        bad = np.zeros((1, 5), np.float32)
        error_message(self, http(self.server, "POST", f"/v2/models/{MODEL}/infer",
                                 json_body={"inputs": [{"name": "input", "shape": [1, 5], "datatype": "FP32",
                                                        "data": [0.0] * 5}]}), 400)
        error_message(self, http(self.server, "POST", "/v1/infer", json_body={"input": [0.0] * 5, "shape": [1, 5]}),
                      400)
        with self.assertRaises(tg.grpc.RpcError) as ctx:
            self.stub.ModelInfer(tg.infer_request(MODEL, "input", "FP32", bad, raw=False), timeout=ts.HTTP_TIMEOUT_S)
        self.assertEqual(ctx.exception.code(), tg.grpc.StatusCode.INVALID_ARGUMENT, ctx.exception.details())

    # ---- the test ----

    def test_scrape_rules_and_dashboard(self):
        # The deploy files as promtool sees them: nothing but success.
        for args in (("check", "config", PROM_CONFIG), ("check", "rules", ALERTS)):
            rc, out = self.promtool(*args)
            self.assertEqual(rc, 0, out)
            noise = [l for l in out.splitlines()
                     if l.strip() and not l.startswith("Checking ") and not l.strip().startswith("SUCCESS:")]
            self.assertEqual(noise, [], f"promtool {' '.join(args)} reports:\n{out}")

        # (a) /metrics passes promtool's lint, before and after traffic.
        text = self.check_metrics_text("before traffic")
        families = exported_families(text)

        # (b) The model's series exist at 0 in a scrape before any request.
        self.wait_until(self.target_up, "the scrape target to be up", SCRAPE_WAIT_S)
        sel = f'job="{JOB}", model="{MODEL}"'

        def zeros_scraped():
            req = self.query(f'mcp_requests_total{{{sel}, code="200"}}')
            err = self.query(f'mcp_inference_errors_total{{{sel}, reason="invalid_input"}}')
            protocols = {s["metric"]["protocol"] for s in req}
            return (protocols == {"v2", "v1", "simple", "grpc"} and len(err) == 1
                    and all(float(s["value"][1]) == 0 for s in req + err))
        self.wait_until(zeros_scraped, f"a scrape of {MODEL}'s request series at 0", SCRAPE_WAIT_S)

        self.traffic()
        t_end = time.time()
        n_http = self.HTTP_V2 + self.HTTP_V1 + self.HTTP_SIMPLE
        ok, bad = n_http + self.GRPC, sum(self.INVALID.values())
        _, server_samples = get_metrics(self, self.server)
        self.assertEqual(metric_sum(server_samples, "mcp_requests_total", model=MODEL, code="200"), ok)

        # The first scrape that began after the last answer; every query
        # below is evaluated at its timestamp.
        at = self.scrape_after(t_end + 0.05)
        self.assertEqual(self.scalar(f'sum(mcp_requests_total{{{sel}, code="200"}})', at), ok)
        for protocol, n in (("v2", self.HTTP_V2), ("v1", self.HTTP_V1), ("simple", self.HTTP_SIMPLE),
                            ("grpc", self.GRPC)):
            with self.subTest(protocol=protocol):
                self.assertEqual(
                    self.scalar(f'sum(mcp_requests_total{{{sel}, protocol="{protocol}", code="200"}})', at), n)
                self.assertEqual(
                    self.scalar(f'sum(mcp_requests_total{{{sel}, protocol="{protocol}", code!="200"}}) or vector(0)',
                                at), self.INVALID.get(protocol, 0))
        self.assertEqual(self.scalar(f'sum(mcp_inference_errors_total{{{sel}, reason="invalid_input"}})', at), bad)
        self.assertEqual(self.scalar(f'sum(mcp_inference_errors_total{{{sel}, reason!="invalid_input"}})', at), 0)
        self.assertEqual(self.scalar(f'sum(mcp_requests_total{{{sel}}})', at), ok + bad)
        # rate() and increase() see the first requests, because the series
        # were scraped at 0 before them. Prometheus extrapolates, which only
        # ever enlarges a counter's increase (at a scrape's own timestamp,
        # from a series that starts at 0, by nothing): the exact counts are
        # the raw counters' above.
        inc = self.scalar(f'sum(increase(mcp_requests_total{{{sel}, code="200"}}[1m]))', at)
        self.assertGreaterEqual(inc, ok - 1e-6)
        self.assertLessEqual(inc, 2 * ok)
        inc_err = self.scalar(f'sum(increase(mcp_inference_errors_total{{{sel}, reason="invalid_input"}}[1m]))', at)
        self.assertGreaterEqual(inc_err, bad - 1e-6)
        self.assertLessEqual(inc_err, 2 * bad)
        self.assertGreater(self.scalar(f'sum(rate(mcp_requests_total{{{sel}, code="200"}}[1m]))', at), 0)
        self.assertGreater(self.scalar(f'sum(rate(mcp_request_duration_seconds_count{{{sel}}}[1m]))', at), 0)
        p99 = self.scalar('histogram_quantile(0.99, sum by (le) '
                          f'(rate(mcp_request_duration_seconds_bucket{{{sel}}}[1m])))', at)
        self.assertGreater(p99, 0)
        text = self.check_metrics_text("after traffic")
        families.update(exported_families(text))

        # The per-version queue and memory gauges: one series for the one
        # version of the model, labelled model and version; the queue has
        # drained (every request was answered), has a limit, and the version
        # holds memory.
        for name, labels in VERSION_FAMILIES.items():
            with self.subTest(family=name):
                self.assertEqual(families.get(name), "gauge", f"{name}: not a gauge in /metrics")
                got = self.query(f'{name}{{{sel}}}', at)
                self.assertEqual(len(got), 1, f"{name}: {got}")
                self.assertEqual(set(got[0]["metric"]) - TARGET_LABELS, labels, f"{name} labels")
                self.assertTrue(got[0]["metric"]["version"], f"{name}: empty version")
        self.assertEqual(self.scalar(f'sum(mcp_model_queue_depth{{{sel}}})', at), 0)
        self.assertGreater(self.scalar(f'sum(mcp_model_queue_capacity{{{sel}}})', at), 0)
        self.assertGreater(self.scalar(f'sum(mcp_model_resident_bytes{{{sel}}})', at), 0)
        self.assertEqual(self.scalar(f'sum(mcp_model_queue_depth{{{sel}}} / mcp_model_queue_capacity{{{sel}}})',
                                     at), 0)

        # (c) The alert rules load in this Prometheus and evaluate cleanly.
        with open(ALERTS) as f:
            rule_list = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]
        wanted = {r["alert"] for r in rule_list if "alert" in r}
        self.assertTrue(wanted)
        for r in rule_list:
            self.assertIn("for", r, f"alert {r.get('alert')}: no 'for:' duration")
            self.assertTrue({"summary", "description"} <= set(r.get("annotations") or {}),
                            f"alert {r.get('alert')}: summary and description annotations wanted")

        def rules_evaluated():
            _, body = self.api("rules")
            rules = {r["name"]: r for g in body["data"]["groups"] for r in g["rules"]}
            self.assertTrue(wanted <= set(rules), f"rules not loaded: {sorted(wanted - set(rules))}")
            for name in wanted:
                self.assertNotEqual(rules[name]["health"], "err", f"{name}: {rules[name].get('lastError')}")
            return all(rules[name]["health"] == "ok" for name in wanted)
        self.wait_until(rules_evaluated, "every alert rule to be evaluated", RULES_WAIT_S)

        # (d) Every dashboard query parses here and names only exported families.
        exported = series_names(families)
        # While the drift monitor is not in /metrics yet its names are skipped
        # below; once it is, its labels must be the ones the panels use.
        for name, labels in DRIFT_FAMILIES.items():
            if name in families:
                got = [set(s["metric"]) - TARGET_LABELS for s in self.query(f'{name}{{job="{JOB}"}}')]
                for g in got:
                    self.assertEqual(g, labels, f"{name} labels")
        with open(DASHBOARD) as f:
            dash = json.load(f)
        self.assertGreaterEqual(dash.get("schemaVersion", 0), 36)
        templating = dash["templating"]["list"]
        variables = {v["name"] for v in templating}
        ds_vars = {v["name"] for v in templating if v["type"] == "datasource" and v.get("query") == "prometheus"}
        self.assertTrue(ds_vars, "no Prometheus data source variable")
        self.assertIn("model", variables)
        exprs = []  # (where, expression)
        for v in templating:
            if v["type"] == "query":
                q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
                m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", q)
                self.assertTrue(m, f"variable {v['name']}: {q}")
                exprs.append((f"variable {v['name']}", m.group(1)))
        model_var = next(v for v in templating if v["name"] == "model")
        self.assertEqual(model_var["query"]["query"], "label_values(mcp_requests_total, model)")
        ids = set()
        for p in dashboard_panels(dash["panels"]):
            self.assertNotIn(p["id"], ids, f"panel id {p['id']} twice")
            ids.add(p["id"])
            if p["type"] == "row":
                continue
            self.assertTrue(p.get("targets"), f"panel {p['title']!r} has no query")
            for t in p["targets"]:
                ds = t.get("datasource") or p.get("datasource") or {}
                self.assertIn(ds.get("uid"), {f"${{{v}}}" for v in ds_vars} | {f"${v}" for v in ds_vars},
                              f"panel {p['title']!r}: data source {ds}")
                exprs.append((f"panel {p['title']!r} {t['refId']}", t["expr"]))
        self.assertGreaterEqual(len([w for w, _ in exprs if w.startswith("panel")]), 10)
        # The queue and memory panels show each model version.
        panel_names = set()
        for where, expr in exprs:
            if where.startswith("panel"):
                panel_names |= promql_metric_names(grafana_interpolate(expr, variables))
        self.assertTrue(set(VERSION_FAMILIES) <= panel_names,
                        f"no panel reads {sorted(set(VERSION_FAMILIES) - panel_names)}")
        queue_alert = next(r for r in rule_list if r.get("alert") == "McpQueueSaturated")
        self.assertEqual(promql_metric_names(queue_alert["expr"]), {"mcp_model_queue_depth", "mcp_model_queue_capacity"})
        # The alert rules name only exported families too (and Prometheus's
        # own `up`, which it writes for every target).
        exprs += [(f"alert {r['alert']}", r["expr"]) for r in rule_list]
        exported.add("up")
        skipped = set()
        for where, expr in exprs:
            q = grafana_interpolate(expr, variables)
            with self.subTest(query=where):
                status, body = self.api("query", query=q, time=f"{at:.3f}")
                self.assertEqual((status, body.get("status")), (200, "success"), f"{q}: {body}")
                names = promql_metric_names(q)
                self.assertTrue(names, f"{q}: no metric name found")
                for name in sorted(names):
                    if name in exported:
                        continue
                    if name in DRIFT_FAMILIES:
                        skipped.add(name)
                        continue
                    self.fail(f"{where}: {name} is not a family /metrics exports\n{q}")
        for name in sorted(skipped):
            with self.subTest(drift_family=name):
                # Not exported yet: the drift monitor writes it. Skipped, not
                # failed, until it lands; then the loop above checks it too.
                self.skipTest(f"{name} is not in /metrics yet (the drift monitor exports it)")


class AlertRuleTests(unittest.TestCase):
    """deploy/prometheus/alerts.yml under `promtool test rules`: each alert
    fires on synthetic series that break its condition for longer than its
    `for:`, and stays quiet on healthy ones. Annotations are left out of the
    copy under test (their wording is not what is checked here)."""

    # interval 1m: "0+600x30" is a counter growing 10/s for 30 minutes.
    SERIES = [
        # Error ratio: model m fails 10%; model ok fails none; model rare
        # fails everything but gets too little traffic to page anyone.
        ('mcp_requests_total{model="m",version="v1",protocol="v2",code="200"}', "0+540x40"),
        ('mcp_requests_total{model="m",version="v1",protocol="v2",code="400"}', "0+60x40"),
        ('mcp_inference_errors_total{model="m",reason="invalid_input"}', "0+60x40"),
        ('mcp_requests_total{model="ok",version="v1",protocol="grpc",code="200"}', "0+600x40"),
        ('mcp_inference_errors_total{model="ok",reason="invalid_input"}', "0x40"),
        ('mcp_requests_total{model="rare",version="v1",protocol="v1",code="400"}', "0+3x40"),
        ('mcp_inference_errors_total{model="rare",reason="invalid_input"}', "0+3x40"),
        # Latency: every request of m between 1 and 2.5 s; ok all under 0.1 s.
        ('mcp_request_duration_seconds_bucket{model="m",version="v1",le="0.1"}', "0x40"),
        ('mcp_request_duration_seconds_bucket{model="m",version="v1",le="1"}', "0x40"),
        ('mcp_request_duration_seconds_bucket{model="m",version="v1",le="2.5"}', "0+600x40"),
        ('mcp_request_duration_seconds_bucket{model="m",version="v1",le="+Inf"}', "0+600x40"),
        ('mcp_request_duration_seconds_bucket{model="ok",version="v1",le="0.1"}', "0+600x40"),
        ('mcp_request_duration_seconds_bucket{model="ok",version="v1",le="1"}', "0+600x40"),
        ('mcp_request_duration_seconds_bucket{model="ok",version="v1",le="2.5"}', "0+600x40"),
        ('mcp_request_duration_seconds_bucket{model="ok",version="v1",le="+Inf"}', "0+600x40"),
        ('mcp_queue_duration_seconds_bucket{model="m",version="v1",le="0.1"}', "0x40"),
        ('mcp_queue_duration_seconds_bucket{model="m",version="v1",le="1"}', "0+600x40"),
        ('mcp_queue_duration_seconds_bucket{model="m",version="v1",le="+Inf"}', "0+600x40"),
        # Queues, per model version and instance: m v1 on a is 88% full
        # (fires); m v1 on b and m v2 on a are nearly empty; ok v1 holds 600
        # (more than a fixed threshold of 512 would allow, but 59% of its
        # limit: healthy); burst v1 has been full for 3 minutes only (pending
        # at 30m, under its `for:`); a capacity of 0 matches nothing.
        ('mcp_model_queue_depth{job="mcp2026",instance="a",model="m",version="v1"}', "900x40"),
        ('mcp_model_queue_capacity{job="mcp2026",instance="a",model="m",version="v1"}', "1024x40"),
        ('mcp_model_queue_depth{job="mcp2026",instance="b",model="m",version="v1"}', "3x40"),
        ('mcp_model_queue_capacity{job="mcp2026",instance="b",model="m",version="v1"}', "1024x40"),
        ('mcp_model_queue_depth{job="mcp2026",instance="a",model="m",version="v2"}', "100x40"),
        ('mcp_model_queue_capacity{job="mcp2026",instance="a",model="m",version="v2"}', "1024x40"),
        ('mcp_model_queue_depth{job="mcp2026",instance="a",model="ok",version="v1"}', "600x40"),
        ('mcp_model_queue_capacity{job="mcp2026",instance="a",model="ok",version="v1"}', "1024x40"),
        ('mcp_model_queue_depth{job="mcp2026",instance="a",model="burst",version="v1"}', "0x26 1000x13"),
        ('mcp_model_queue_capacity{job="mcp2026",instance="a",model="burst",version="v1"}', "1024x40"),
        ('mcp_model_queue_depth{job="mcp2026",instance="a",model="nolimit",version="v1"}', "5x40"),
        ('mcp_model_queue_capacity{job="mcp2026",instance="a",model="nolimit",version="v1"}', "0x40"),
        # The unlabeled total stays exported; no alert reads it any more.
        ('mcp_queue_depth{job="mcp2026",instance="a"}', "1000x40"),
        # m refuses requests with a full queue; ok does not.
        ('mcp_inference_errors_total{model="m",reason="queue_full"}', "0+6x40"),
        ('mcp_inference_errors_total{model="ok",reason="queue_full"}', "0x40"),
        # The target: a down, b up; a nearly out of file descriptors.
        ('up{job="mcp2026",instance="a"}', "0x40"),
        ('up{job="mcp2026",instance="b"}', "1x40"),
        ('process_open_fds{job="mcp2026",instance="a"}', "990x40"),
        ('process_max_fds{job="mcp2026",instance="a"}', "1024x40"),
        ('process_open_fds{job="mcp2026",instance="b"}', "10x40"),
        ('process_max_fds{job="mcp2026",instance="b"}', "1024x40"),
        # Drift: one statistic of m v1 above its threshold, one below; v2 quiet.
        ('mcp_monitor_drift_score{model="m",version="v1",output="probabilities",statistic="psi"}', "0.5x40"),
        ('mcp_monitor_drift_score{model="m",version="v1",output="probabilities",statistic="ks"}', "0.05x40"),
        ('mcp_monitor_drift_score{model="m",version="v2",output="probabilities",statistic="psi"}', "0.1x40"),
        ('mcp_monitor_drift_threshold{model="m",version="v1"}', "0.2x40"),
        ('mcp_monitor_drift_threshold{model="m",version="v2"}', "0.2x40"),
        # KV cache: g v1 full, g v2 half used.
        ('mcp_kv_cache_blocks{model="g",version="v1",state="used"}', "98x40"),
        ('mcp_kv_cache_blocks{model="g",version="v1",state="total"}', "100x40"),
        ('mcp_kv_cache_blocks{model="g",version="v1",state="cached"}', "30x40"),
        ('mcp_kv_cache_blocks{model="g",version="v2",state="used"}', "50x40"),
        ('mcp_kv_cache_blocks{model="g",version="v2",state="total"}', "100x40"),
        ('mcp_generation_preemptions_total{model="g",version="v1"}', "0+60x40"),
        ('mcp_generation_preemptions_total{model="g",version="v2"}', "0x40"),
    ]
    # alert -> the label sets it must fire with at 30m (severity added from the rule).
    EXPECTED = {
        "McpServerDown": [{"job": "mcp2026", "instance": "a"}],
        "McpHighErrorRatio": [{"model": "m"}],
        "McpHighP99Latency": [{"model": "m"}],
        "McpQueueSaturated": [{"job": "mcp2026", "instance": "a", "model": "m", "version": "v1"}],
        "McpQueueFullRejections": [{"model": "m"}],
        "McpQueueWaitHigh": [{"model": "m"}],
        "McpFileDescriptorsNearLimit": [{"job": "mcp2026", "instance": "a"}],
        "McpModelDrift": [{"model": "m", "version": "v1", "output": "probabilities", "statistic": "psi"}],
        "McpKvCacheSaturated": [{"model": "g", "version": "v1"}],
        "McpGenerationPreemptions": [{"model": "g", "version": "v1"}],
    }

    def test_each_alert_fires_only_on_its_condition(self):
        with open(ALERTS) as f:
            rules = yaml.safe_load(f)
        severity = {}
        for g in rules["groups"]:
            for r in g["rules"]:
                r.pop("annotations", None)
                severity[r["alert"]] = r["labels"]["severity"]
        self.assertEqual(set(severity), set(self.EXPECTED), "an alert without a case here, or a case without an alert")
        with tempfile.TemporaryDirectory(prefix="mcp-e2e-rules-") as d:
            with open(os.path.join(d, "alerts.yml"), "w") as f:
                yaml.safe_dump(rules, f)
            cases = []
            for name, label_sets in self.EXPECTED.items():
                # Pending at first (nothing has lasted its `for:` yet), firing at 30m.
                cases.append({"eval_time": "0m", "alertname": name, "exp_alerts": []})
                cases.append({"eval_time": "30m", "alertname": name,
                              "exp_alerts": [{"exp_labels": {**ls, "severity": severity[name]}} for ls in label_sets]})
            test = {"rule_files": ["alerts.yml"], "evaluation_interval": "1m",
                    "tests": [{"interval": "1m",
                               "input_series": [{"series": s, "values": v} for s, v in self.SERIES],
                               "alert_rule_test": cases}]}
            with open(os.path.join(d, "test.yml"), "w") as f:
                yaml.safe_dump(test, f)
            p = subprocess.run([PROMTOOL_BIN, "test", "rules", "test.yml"], cwd=d, capture_output=True,
                               timeout=PROMTOOL_TIMEOUT_S)
            out = (p.stdout + p.stderr).decode(errors="replace")
            self.assertEqual(p.returncode, 0, out)
            self.assertIn("SUCCESS", out)


if __name__ == "__main__":
    unittest.main()
