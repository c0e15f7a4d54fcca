#!/usr/bin/python3
"""Tenants, identities and access rules, end to end (issue 14): a real
server with an `auth` section (API keys and JWT), models in tenant
namespaces and a shared one, called over HTTP and gRPC on TCP and on their
Unix sockets by every role, another tenant and no one.

Run one class by hand:
  MCP_SERVER_BIN=build/bin/mcp2026-server MCPCTL_BIN=build/bin/mcpctl \\
    /usr/bin/python3 -m unittest -v test_tenants.AccessMatrixTests
"""
import base64
import hashlib
import hmac
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

import test_grpc as tg
import test_server as ts

ISSUER = "https://issuer.example"
AUDIENCE = "mcp2026"

# key text -> (tenant, subject, roles)
KEYS = {
    "key-admin-0123456789": ("", "root", ["admin"]),
    "key-t1-operator-0123": ("t1", "deploy", ["operator"]),
    "key-t1-invoker-01234": ("t1", "app", ["invoker"]),
    "key-t1-viewer-012345": ("t1", "dash", ["viewer"]),
    "key-t2-invoker-01234": ("t2", "app2", ["invoker"]),
    "key-t2-operator-0123": ("t2", "deploy2", ["operator"]),
    "key-t3-invoker-01234": ("t3", "burst", ["invoker"]),
}
ADMIN, T1_OP, T1_INV, T1_VIEW, T2_INV, T2_OP, T3_INV = KEYS


def setUpModule():
    tg.setUpModule()


def tearDownModule():
    tg.tearDownModule()


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned_token(header, claims, signature=b""):
    return ".".join([b64url(json.dumps(header).encode()), b64url(json.dumps(claims).encode()), b64url(signature)])


class TenantServer:
    """The configuration, keys and secrets of one multi-tenant server."""

    def __init__(self, tmp, tenants_extra=""):
        self.tmp = tmp
        self.models = os.path.join(tmp, "models")
        os.mkdir(self.models)
        shutil.copy(ts.DIGITS, os.path.join(self.models, "digits.onnx"))
        with open(os.path.join(tmp, "keys.yaml"), "w") as f:
            f.write("keys:\n")
            for key, (tenant, subject, roles) in KEYS.items():
                sha = hashlib.sha256(key.encode()).hexdigest()
                t = f", tenant: {tenant}" if tenant else ""
                f.write(f"  - {{sha256: {sha}{t}, subject: {subject}, roles: [{', '.join(roles)}]}}\n")
        self.hs_secret = os.urandom(48)
        with open(os.path.join(tmp, "jwt.secret"), "wb") as f:
            f.write(self.hs_secret)
        self.rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.rsa_pub_pem = self.rsa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        with open(os.path.join(tmp, "jwt.pub.pem"), "wb") as f:
            f.write(self.rsa_pub_pem)
        self.config = os.path.join(tmp, "server.yaml")
        with open(self.config, "w") as f:
            f.write(f"""auth:
  api_keys_file: keys.yaml
  jwt:
    issuer: {ISSUER}
    audience: {AUDIENCE}
    hs256_secret_file: jwt.secret
    rs256_public_key_file: jwt.pub.pem
    tenant_claim: tenant
tenants:
  t1: {{weight: 2}}
  t2: {{weight: 1}}
  t3: {{rps: 1, burst: 2}}
{tenants_extra}""")
        self.store = os.path.join(tmp, "store")
        self.http_sock = os.path.join(tmp, "http.sock")
        self.grpc_sock = os.path.join(tmp, "grpc.sock")
        self.grpc_port = tg.free_port()

    def args(self):
        return ["--config", self.config, "--model-path", ts.DIGITS, "--model-root", self.models,
                "--store", self.store, "--grpc-port", self.grpc_port,
                "--http-socket", self.http_sock, "--grpc-socket", self.grpc_sock]

    def token(self, alg="RS256", **over):
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "svc", "tenant": "t1", "roles": ["invoker"],
                  "iat": now, "exp": now + 600}
        claims.update(over)
        claims = {k: v for k, v in claims.items() if v is not None}
        if alg == "RS256":
            return jwt.encode(claims, self.rsa_key, algorithm="RS256")
        return jwt.encode(claims, self.hs_secret, algorithm="HS256")


def bearer(key):
    return {"Authorization": f"Bearer {key}"} if key else {}


def descriptor(name):
    return f"name: {name}\nformat: onnx\npath: digits.onnx\n"


class TenantTestCase(unittest.TestCase):
    """One multi-tenant server per class with t1/digits and t2/digits loaded
    by the admin beside the shared digits."""

    EXTRA = ""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mcp-e2e-tenants-")
        try:
            cls.ts = TenantServer(cls.tmp, cls.EXTRA)
            cls.server = ts.Server(*cls.ts.args()).start()
            for name in ("t1/digits", "t2/digits"):
                r = ts.http(cls.server, "POST", f"/v2/repository/models/{name}/load",
                            json_body={"parameters": {"config": descriptor(name)}}, headers=bearer(ADMIN))
                if r.status_code != 200:
                    raise AssertionError(f"admin load of {name}: {r.status_code} {r.text}")
        except BaseException:
            if getattr(cls, "server", None):
                cls.server.kill()
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            rc = cls.server.stop()
            if rc != 0:
                raise AssertionError(f"server exited with {rc}\n{cls.server.stderr_text()}")
        finally:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def call(self, method, path, key=None, headers=None, **kw):
        h = dict(bearer(key))
        h.update(headers or {})
        return ts.http(self.server, method, path, headers=h, **kw)

    def unix_call(self, method, path, key=None, body=None, headers=None):
        sock_path = self.ts.http_sock

        class UnixConnection(http.client.HTTPConnection):
            def connect(conn):
                conn.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                conn.sock.settimeout(60)
                conn.sock.connect(sock_path)

        h = dict(bearer(key))
        h.update(headers or {})
        c = UnixConnection("localhost")
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data


def infer_body():
    body, headers = ts.v2_request([("input", "FP32", ts.samples()[0], False)])
    return body, headers


# What each identity may do, from the issue's rules: (tenant, roles).
ROLE_ACTIONS = {
    "admin": {"metadata", "stats", "infer"},
    "operator": {"metadata", "stats", "infer"},
    "invoker": {"metadata", "infer"},
    "viewer": {"metadata", "stats"},
}


def expected(key, action, model):
    """The status a caller gets for an action on a model."""
    if key is None:
        return 401
    tenant, _, roles = KEYS[key]
    if "admin" in roles:
        return 200
    namespace = model.split("/")[0] if "/" in model else None
    if namespace is not None and namespace != tenant:
        return 404
    if not any(action in ROLE_ACTIONS[r] for r in roles):
        return 403
    return 200


IDENTITIES = [ADMIN, T1_OP, T1_INV, T1_VIEW, T2_INV, None]
MODELS = ["t1/digits", "t2/digits", "digits"]


class AccessMatrixTests(TenantTestCase):
    """Every role x every model endpoint x own tenant / other tenant /
    shared / no identity, on HTTP over TCP and its Unix socket and on gRPC
    over TCP and its Unix socket: the exact status each time."""

    HTTP_ENDPOINTS = [
        ("metadata", "GET", "/v2/models/{m}"),
        ("metadata", "GET", "/v2/models/{m}/ready"),
        ("metadata", "GET", "/v2/models/{m}/config"),
        ("stats", "GET", "/v2/models/{m}/stats"),
        ("infer", "POST", "/v2/models/{m}/infer"),
        ("metadata", "GET", "/v1/models/{m}"),
    ]

    def http_status(self, via_unix, key, method, path):
        body, headers = infer_body() if method == "POST" else (None, {})
        if via_unix:
            return self.unix_call(method, path, key, body=body, headers=headers)[0]
        return self.call(method, path, key, body=body, headers=headers).status_code

    def test_http_matrix_tcp_and_unix_socket(self):
        failures = []
        for via_unix in (False, True):
            for key in IDENTITIES:
                for model in MODELS:
                    for action, method, pattern in self.HTTP_ENDPOINTS:
                        path = pattern.replace("{m}", model)
                        want = expected(key, action, model)
                        got = self.http_status(via_unix, key, method, path)
                        if got != want:
                            who = KEYS[key][1] if key else "anonymous"
                            failures.append(f"{'unix' if via_unix else 'tcp'} {who} {method} {path}: {got}, want {want}")
        self.assertEqual(failures, [])

    def grpc_status(self, channel, key, action, model):
        stub = tg.pb_grpc.GRPCInferenceServiceStub(channel)
        md = [("authorization", f"Bearer {key}")] if key else []
        try:
            if action == "metadata":
                stub.ModelMetadata(tg.pb.ModelMetadataRequest(name=model), metadata=md, timeout=30)
            elif action == "stats":
                stub.ModelStatistics(tg.pb.ModelStatisticsRequest(name=model), metadata=md, timeout=30)
            else:
                stub.ModelInfer(tg.infer_request(model, "input", "FP32", ts.samples()[0], True), metadata=md, timeout=30)
            return 200
        except tg.grpc.RpcError as e:
            return {tg.grpc.StatusCode.UNAUTHENTICATED: 401, tg.grpc.StatusCode.PERMISSION_DENIED: 403,
                    tg.grpc.StatusCode.NOT_FOUND: 404}.get(e.code(), str(e.code()))

    def test_grpc_matrix_tcp_and_unix_socket(self):
        failures = []
        for target in (f"127.0.0.1:{self.ts.grpc_port}", f"unix:{self.ts.grpc_sock}"):
            with tg.grpc.insecure_channel(target) as ch:
                for key in IDENTITIES:
                    for model in MODELS:
                        for action in ("metadata", "stats", "infer"):
                            want = expected(key, action, model)
                            got = self.grpc_status(ch, key, action, model)
                            if got != want:
                                who = KEYS[key][1] if key else "anonymous"
                                failures.append(f"{target} {who} {action} {model}: {got}, want {want}")
        self.assertEqual(failures, [])

    SERVER_ENDPOINTS = [
        ("health", "GET", "/v2/health/ready"),
        ("health", "GET", "/v2/health/live"),
        ("server", "GET", "/v2"),
        ("server", "GET", "/openapi.json"),
        ("metrics", "GET", "/metrics"),
        ("metadata", "POST", "/v2/repository/index"),
        ("metadata", "GET", "/v1/models"),
        ("stats", "GET", "/v2/models/stats"),
        ("stats", "GET", "/v2/status"),
        ("events", "GET", "/v2/events"),
        ("settings", "GET", "/v2/logging"),
        ("settings", "GET", "/v2/trace/setting"),
    ]
    SERVER_ACTIONS = {
        "admin": {"health", "server", "metrics", "metadata", "stats", "events", "settings"},
        "operator": {"health", "server", "metrics", "metadata", "stats", "events"},
        "invoker": {"health", "server", "metadata"},
        "viewer": {"health", "server", "metadata", "stats", "metrics"},
    }

    def server_expected(self, key, action):
        if key is None:
            return 200 if action in ("health", "metrics") else 401  # anonymous: loopback and the Unix socket
        roles = KEYS[key][2]
        return 200 if any(action in self.SERVER_ACTIONS[r] for r in roles) else 403

    def test_server_endpoint_matrix_tcp_and_unix_socket(self):
        failures = []
        for via_unix in (False, True):
            for key in IDENTITIES:
                for action, method, path in self.SERVER_ENDPOINTS:
                    body = b"{}" if method == "POST" else None
                    headers = {"Content-Type": "application/json"} if body else {}
                    if via_unix:
                        got = self.unix_call(method, path, key, body=body, headers=headers)[0]
                    else:
                        got = self.call(method, path, key, body=body, headers=headers).status_code
                    want = self.server_expected(key, action)
                    if got != want:
                        who = KEYS[key][1] if key else "anonymous"
                        failures.append(f"{'unix' if via_unix else 'tcp'} {who} {method} {path}: {got}, want {want}")
        self.assertEqual(failures, [])

    def test_grpc_server_method_matrix(self):
        failures = []
        for target in (f"127.0.0.1:{self.ts.grpc_port}", f"unix:{self.ts.grpc_sock}"):
            with tg.grpc.insecure_channel(target) as ch:
                stub = tg.pb_grpc.GRPCInferenceServiceStub(ch)
                health = tg.hp_grpc.HealthStub(ch)
                calls = [("health", lambda md: stub.ServerLive(tg.pb.ServerLiveRequest(), metadata=md, timeout=30)),
                         ("health", lambda md: health.Check(tg.hp.HealthCheckRequest(), metadata=md, timeout=30)),
                         ("server", lambda md: stub.ServerMetadata(tg.pb.ServerMetadataRequest(), metadata=md, timeout=30)),
                         ("metadata", lambda md: stub.RepositoryIndex(tg.pb.RepositoryIndexRequest(), metadata=md,
                                                                      timeout=30)),
                         ("stats", lambda md: stub.ModelStatistics(tg.pb.ModelStatisticsRequest(), metadata=md,
                                                                   timeout=30))]
                for key in IDENTITIES:
                    md = [("authorization", f"Bearer {key}")] if key else []
                    for action, fn in calls:
                        try:
                            fn(md)
                            got = 200
                        except tg.grpc.RpcError as e:
                            got = {tg.grpc.StatusCode.UNAUTHENTICATED: 401,
                                   tg.grpc.StatusCode.PERMISSION_DENIED: 403}.get(e.code(), str(e.code()))
                        want = self.server_expected(key, action)
                        if got != want:
                            who = KEYS[key][1] if key else "anonymous"
                            failures.append(f"{target} {who} {action}: {got}, want {want}")
        self.assertEqual(failures, [])

    def test_hidden_model_answers_exactly_as_an_unknown_one(self):
        hidden = self.call("GET", "/v2/models/t2/digits", T1_INV)
        unknown = self.call("GET", "/v2/models/t1/nothing", T1_INV)
        self.assertEqual(hidden.status_code, 404)
        self.assertEqual(ts.error_message(self, hidden, 404).replace("t2/digits", "X"),
                         ts.error_message(self, unknown, 404).replace("t1/nothing", "X"))

    def test_health_and_metrics_are_anonymous_on_loopback_only_others_need_a_credential(self):
        self.assertEqual(self.call("GET", "/v2/health/ready").status_code, 200)
        self.assertEqual(self.call("GET", "/metrics").status_code, 200)
        r = self.call("GET", "/v2/models/stats")
        self.assertEqual(r.status_code, 401)
        self.assertIn("Bearer", r.headers.get("WWW-Authenticate", ""))
        self.assertEqual(self.call("GET", "/v2").status_code, 401)

    def test_listings_show_only_what_the_caller_may_see(self):
        def names(key):
            r = self.call("POST", "/v2/repository/index", key, json_body={})
            self.assertEqual(r.status_code, 200, r.text)
            return sorted(m["name"] for m in r.json())
        self.assertEqual(names(T1_INV), ["digits", "t1/digits"])
        self.assertEqual(names(T2_INV), ["digits", "t2/digits"])
        self.assertEqual(names(ADMIN), ["digits", "t1/digits", "t2/digits"])
        stats = self.call("GET", "/v2/models/stats", T1_VIEW).json()
        self.assertEqual(sorted(s["name"] for s in stats["model_stats"]), ["digits", "t1/digits"])
        status = self.call("GET", "/v2/status", T1_OP).json()
        self.assertEqual(sorted(m["name"] for m in status["models"]), ["digits", "t1/digits"])
        v1 = self.call("GET", "/v1/models", T2_INV).json()
        self.assertEqual(sorted(v1["models"]), ["digits", "t2/digits"])
        with tg.grpc.insecure_channel(f"127.0.0.1:{self.ts.grpc_port}") as ch:
            stub = tg.pb_grpc.GRPCInferenceServiceStub(ch)
            idx = stub.RepositoryIndex(tg.pb.RepositoryIndexRequest(), metadata=[("authorization", f"Bearer {T2_INV}")],
                                       timeout=30)
            self.assertEqual(sorted(m.name for m in idx.models), ["digits", "t2/digits"])

    def test_metrics_show_a_tenant_only_its_models_and_its_tenant(self):
        self.assertEqual(self.call("POST", "/v2/models/t2/digits/infer", T2_INV, body=infer_body()[0],
                                   headers=infer_body()[1]).status_code, 200)
        self.assertEqual(self.call("POST", "/v2/models/t1/digits/infer", T1_INV, body=infer_body()[0],
                                   headers=infer_body()[1]).status_code, 200)
        everything = self.call("GET", "/metrics", ADMIN).text
        self.assertIn('model="t2/digits"', everything)
        self.assertIn('tenant="t2"', everything)
        mine = self.call("GET", "/metrics", T1_OP).text
        self.assertIn('model="t1/digits"', mine)
        self.assertIn('tenant="t1"', mine)
        self.assertNotIn("t2/digits", mine)
        self.assertNotIn('tenant="t2"', mine)

    def test_events_are_audited_and_each_tenant_reads_its_own(self):
        self.assertEqual(self.call("GET", "/v2/models/t1/digits", T2_INV).status_code, 404)
        self.assertEqual(self.call("GET", "/v2/models/t1/digits", "not-a-key").status_code, 401)
        def events(key, q=""):
            for _ in range(50):  # the audit writer is asynchronous
                r = self.call("GET", "/v2/events?limit=1000" + q, key)
                self.assertEqual(r.status_code, 200, r.text)
                evs = r.json()
                if key != ADMIN or (any(e["action"] == "denied" and e["target"] == "t1/digits" for e in evs) and
                                    any(e["outcome"] == "unauthenticated" for e in evs)):
                    return evs
                time.sleep(0.1)
            return evs
        denied = events(ADMIN, "&denied=true")
        self.assertTrue(denied)
        self.assertTrue(all(e["action"] == "denied" for e in denied))
        self.assertTrue(any(e["target"] == "t1/digits" and "t2/app2" in e["actor"] for e in denied), denied)
        self.assertTrue(any(e["outcome"] == "unauthenticated" for e in denied), denied)
        self.assertFalse(any("not-a-key" in json.dumps(e) for e in denied), "a credential reached the event log")
        for e in events(T1_OP):
            self.assertTrue(e["target"] == "t1" or e["target"].startswith("t1/"), e)
        for e in events(T2_OP):
            self.assertTrue(e["target"] == "t2" or e["target"].startswith("t2/"), e)
        loads = [e for e in events(ADMIN) if e["action"] in ("apply", "load") and e["target"].startswith("t1/digits")]
        self.assertTrue(any("root" in e["actor"] for e in loads), loads)
        self.assertEqual(self.call("GET", "/v2/events", T1_INV).status_code, 403)


class ManagementTests(TenantTestCase):
    """Operators manage their own namespace only; shared models are the
    admin's; a descriptor or request carrying a policy is refused."""

    def load(self, name, key, text=None):
        return self.call("POST", f"/v2/repository/models/{name}/load", key,
                         json_body={"parameters": {"config": text or descriptor(name)}})

    def test_operator_loads_and_unloads_in_its_namespace_only(self):
        self.assertEqual(self.load("t1/extra", T1_OP).status_code, 200)
        self.assertEqual(self.call("POST", "/v2/models/t1/extra/infer", T1_INV, body=infer_body()[0],
                                   headers=infer_body()[1]).status_code, 200)
        self.assertEqual(self.load("t2/extra", T1_OP).status_code, 404)
        self.assertEqual(self.load("extra", T1_OP).status_code, 403)
        self.assertEqual(self.load("t1/extra2", T1_INV).status_code, 403)
        self.assertEqual(self.load("t1/extra2", None).status_code, 401)
        # The descriptor must name what the URL names: no side door into t2.
        r = self.load("t1/extra3", T1_OP, descriptor("t2/extra3"))
        self.assertEqual(r.status_code, 400, r.text)
        self.assertEqual(self.call("POST", "/v2/repository/models/t2/digits/unload", T1_OP).status_code, 404)
        self.assertEqual(self.call("POST", "/v2/repository/models/digits/unload", T1_OP).status_code, 403)
        self.assertEqual(self.call("POST", "/v2/repository/models/t1/extra/unload", T1_OP).status_code, 200)
        with tg.grpc.insecure_channel(f"unix:{self.ts.grpc_sock}") as ch:
            stub = tg.pb_grpc.GRPCInferenceServiceStub(ch)
            with self.assertRaises(tg.grpc.RpcError) as cm:
                stub.RepositoryModelUnload(tg.pb.RepositoryModelUnloadRequest(model_name="t2/digits"),
                                           metadata=[("authorization", f"Bearer {T1_OP}")], timeout=30)
            self.assertEqual(cm.exception.code(), tg.grpc.StatusCode.NOT_FOUND)

    def test_settings_are_the_admins(self):
        self.assertEqual(self.call("GET", "/v2/logging", T1_OP).status_code, 403)
        self.assertEqual(self.call("GET", "/v2/logging", ADMIN).status_code, 200)

    def test_policy_fields_in_a_descriptor_or_a_request_are_refused(self):
        for field in ("rbac: {allow: [t2]}", "policy: open", "roles: [admin]"):
            r = self.load("t1/sneaky", T1_OP, descriptor("t1/sneaky") + field + "\n")
            msg = ts.error_message(self, r, 400)
            self.assertIn("policy field", msg)
            self.assertIn("server's configuration", msg)
        body, headers = ts.v2_request([("input", "FP32", ts.samples()[0], False)], parameters={"rbac": "admin"})
        r = self.call("POST", "/v2/models/t1/digits/infer", T1_INV, body=body, headers=headers)
        self.assertIn("policy field", ts.error_message(self, r, 400))


    def test_a_model_file_carrying_a_policy_is_refused(self):
        shutil.copy(ts.model_file("policy_meta"), os.path.join(self.ts.models, "policy_meta.onnx"))
        text = "name: t1/policy\nformat: onnx\npath: policy_meta.onnx\n"
        r = self.load("t1/policy", T1_OP, text)
        msg = ts.error_message(self, r, 400)
        self.assertIn("metadata_props key 'rbac' is a policy field", msg)
        self.assertIn(self.call("GET", "/v2/models/t1/policy/ready", T1_OP).status_code, (404, 503))

    def test_a_gguf_file_carrying_a_policy_is_refused(self):
        tool = os.path.join(ts.SOURCE_DIR, "tools", "gguf_add_key.py")
        demo = os.path.join(ts.DEMO_DIR, "fortunes.gguf")
        for name, key in (("noted", "general.note"), ("sneaky", "mcp.rbac")):
            out = os.path.join(self.ts.models, f"{name}.gguf")
            p = subprocess.run([sys.executable, tool, demo, out, key, "tenants: [t1, t2]"], capture_output=True,
                               timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        # The same edit with a harmless key loads and generates: the file is sound.
        r = self.load("t1/noted", T1_OP, "name: t1/noted\nformat: gguf\npath: noted.gguf\n")
        self.assertEqual(r.status_code, 200, r.text)
        r = self.call("POST", "/v2/models/t1/noted/generate", T1_INV,
                      json_body={"text_input": "a", "parameters": {"max_tokens": 2}})
        self.assertEqual(r.status_code, 200, r.text)
        r = self.load("t1/sneaky", T1_OP, "name: t1/sneaky\nformat: gguf\npath: sneaky.gguf\n")
        msg = ts.error_message(self, r, 400)
        self.assertIn("GGUF metadata key 'mcp.rbac' is a policy field", msg)
        self.assertEqual(self.call("GET", "/v2/models/t1/sneaky/ready", T1_OP).status_code, 404)
        self.assertEqual(self.call("POST", "/v2/repository/models/t1/noted/unload", T1_OP).status_code, 200)


class TokenTests(TenantTestCase):
    """JWTs: HS256 and RS256 accepted; every way a token can be wrong refused."""

    def status(self, token):
        return self.call("GET", "/v2/models/t1/digits", headers={"Authorization": f"Bearer {token}"}).status_code

    def test_good_tokens(self):
        self.assertEqual(self.status(self.ts.token("RS256")), 200)
        self.assertEqual(self.status(self.ts.token("HS256")), 200)
        self.assertEqual(self.status(self.ts.token("RS256", tenant="t2")), 404)

    def test_refused_tokens(self):
        now = int(time.time())
        cases = {
            "expired": self.ts.token(exp=now - 3600),
            "not yet valid": self.ts.token(nbf=now + 3600),
            "wrong issuer": self.ts.token(iss="https://evil.example"),
            "wrong audience": self.ts.token(aud="someone-else"),
            "no exp": self.ts.token(exp=None),
            "unknown role": self.ts.token(roles=["superuser"]),
            "alg none": unsigned_token({"alg": "none", "typ": "JWT"},
                                       {"iss": ISSUER, "aud": AUDIENCE, "tenant": "t1", "roles": ["admin"],
                                        "exp": now + 600}),
        }
        # PyJWT refuses to MAC with a PEM key, so the confusion token is made by hand.
        header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        payload = b64url(json.dumps({"iss": ISSUER, "aud": AUDIENCE, "tenant": "t1", "roles": ["admin"],
                                     "exp": now + 600}).encode())
        mac = hmac.new(self.ts.rsa_pub_pem, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        cases["HS256 with the RS256 public key"] = f"{header}.{payload}.{b64url(mac)}"
        good = self.ts.token()
        h, p, s = good.split(".")
        flipped = s[:-2] + ("A" if s[-2] != "A" else "B") + s[-1]
        cases["wrongly signed"] = f"{h}.{p}.{flipped}"
        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        cases["signed by another key"] = jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "tenant": "t1", "roles": ["admin"],
                                                     "exp": now + 600}, other, algorithm="RS256")
        for what, token in cases.items():
            r = self.call("GET", "/v2/models/t1/digits", headers={"Authorization": f"Bearer {token}"})
            self.assertEqual(r.status_code, 401, f"{what}: {r.text}")
            self.assertNotIn(token, r.text, f"{what}: the answer echoes the token")
        with tg.grpc.insecure_channel(f"127.0.0.1:{self.ts.grpc_port}") as ch:
            stub = tg.pb_grpc.GRPCInferenceServiceStub(ch)
            with self.assertRaises(tg.grpc.RpcError) as cm:
                stub.ModelMetadata(tg.pb.ModelMetadataRequest(name="t1/digits"),
                                   metadata=[("authorization", f"Bearer {cases['alg none']}")], timeout=30)
            self.assertEqual(cm.exception.code(), tg.grpc.StatusCode.UNAUTHENTICATED)


class RateLimitTests(TenantTestCase):
    """A tenant over its rate gets 429 with Retry-After; the others do not."""

    def test_429_with_retry_after(self):
        body, headers = infer_body()
        codes = []
        for _ in range(6):
            r = self.call("POST", "/v2/models/digits/infer", T3_INV, body=body, headers=headers)
            codes.append(r.status_code)
            if r.status_code == 429:
                self.assertGreaterEqual(int(r.headers["Retry-After"]), 1)
                self.assertIn("t3", ts.error_message(self, r, 429))
        self.assertIn(429, codes)
        self.assertEqual(codes[:2], [200, 200], "the burst of 2 is admitted")
        for _ in range(6):  # another tenant on the same model is not limited
            self.assertEqual(self.call("POST", "/v2/models/digits/infer", T1_INV, body=body, headers=headers).status_code, 200)
        with tg.grpc.insecure_channel(f"127.0.0.1:{self.ts.grpc_port}") as ch:
            stub = tg.pb_grpc.GRPCInferenceServiceStub(ch)
            seen = None
            for _ in range(6):
                try:
                    stub.ModelInfer(tg.infer_request("digits", "input", "FP32", ts.samples()[0], True),
                                    metadata=[("authorization", f"Bearer {T3_INV}")], timeout=30)
                except tg.grpc.RpcError as e:
                    seen = e
                    break
            self.assertIsNotNone(seen)
            self.assertEqual(seen.code(), tg.grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assertGreaterEqual(int(dict(seen.trailing_metadata())["retry-after"]), 1)


def saturate(fns_by_tenant, seconds):
    """Runs each tenant's callables in closed loops (one thread each) for
    `seconds`; returns {tenant: [results]} of the calls that ended in time.
    Bounded: every loop stops at the deadline."""
    import threading
    results = {t: [] for t in fns_by_tenant}
    lock = threading.Lock()
    start = time.monotonic()
    deadline = start + seconds

    def loop(tenant, fn):
        for _ in range(100000):
            if time.monotonic() >= deadline:
                return
            out = fn()
            if time.monotonic() < deadline:
                with lock:
                    results[tenant].append(out)

    threads = [threading.Thread(target=loop, args=(t, fn), daemon=True)
               for t, fns in fns_by_tenant.items() for fn in fns]
    for th in threads:
        th.start()
    for th in threads:
        th.join(seconds + 120)
    return results


class FairnessTests(TenantTestCase):
    """Two tenants of weights 2 (t1) and 1 (t2) saturating one model for
    10 s share it 2:1 (within 10%): requests on a tensor model, generated
    tokens on a generative one."""

    def setUp(self):
        super().setUp()
        shutil.copy(ts.model_file("digits_slow"), os.path.join(self.ts.models, "digits_slow.onnx"))
        shutil.copy(os.path.join(ts.DEMO_DIR, "fortunes.gguf"), os.path.join(self.ts.models, "fortunes.gguf"))

    def admin_load(self, name, text):
        r = self.call("POST", f"/v2/repository/models/{name}/load", ADMIN, json_body={"parameters": {"config": text}},
                      timeout=300)
        self.assertEqual(r.status_code, 200, r.text)

    def test_requests_share_by_weight(self):
        self.admin_load("slowfair", "name: slowfair\nformat: onnx\npath: digits_slow.onnx\nmax_batch_size: 0\n"
                                    "instances: {count: 1, threads: 1}\n")
        body, headers = infer_body()

        def client(key):
            def call():
                h = dict(headers)
                h.update(bearer(key))
                return ts.http(self.server, "POST", "/v2/models/slowfair/infer", body=body, headers=h,
                               validate=False).status_code
            return call

        got = saturate({"t1": [client(T1_INV)] * 6, "t2": [client(T2_INV)] * 6}, 10)
        for t in got:
            self.assertTrue(all(c == 200 for c in got[t]), (t, set(got[t])))
        n1, n2 = len(got["t1"]), len(got["t2"])
        self.assertGreater(n2, 10, "too few requests to judge a share")
        self.assertLess(abs(n1 / n2 - 2.0), 0.2, f"t1 (weight 2) {n1} requests, t2 (weight 1) {n2}")
        print(f"fair share: t1 {n1} requests, t2 {n2}: {n1 / n2:.3f}", file=sys.stderr)

    def test_generated_tokens_share_by_weight(self):
        self.admin_load("fortfair", "name: fortfair\nformat: gguf\npath: fortunes.gguf\n"
                                    "generation: {max_sequences: 2}\ninstances: {threads: 1}\n")

        def client(key, i):
            def call():
                r = ts.http(self.server, "POST", "/v2/models/fortfair/generate", headers=bearer(key),
                            json_body={"text_input": f"Fortune {i}:", "max_tokens": 16, "ignore_eos": True,
                                       "temperature": 0}, validate=False)
                return r.json().get("completion_tokens", 0) if r.status_code == 200 else -r.status_code
            return call

        got = saturate({"t1": [client(T1_INV, i) for i in range(4)], "t2": [client(T2_INV, i) for i in range(4)]}, 10)
        for t in got:
            self.assertTrue(all(n > 0 for n in got[t]), (t, got[t][:10]))
        k1, k2 = sum(got["t1"]), sum(got["t2"])
        self.assertGreater(k2, 100, f"too few tokens to judge a share: t1 {k1}, t2 {k2}")
        self.assertLess(abs(k1 / k2 - 2.0), 0.2, f"t1 (weight 2) {k1} tokens, t2 (weight 1) {k2}")
        print(f"fair share: t1 {k1} tokens, t2 {k2}: {k1 / k2:.3f}", file=sys.stderr)


class PrefixIsolationTests(TenantTestCase):
    """The KV prefix cache is keyed by the authenticated tenant: a prompt
    cached for t1 is not reused for t2, and a `tenant` header cannot claim
    another tenant's blocks."""

    def test_no_cross_tenant_blocks(self):
        shutil.copy(os.path.join(ts.DEMO_DIR, "fortunes.gguf"), os.path.join(self.ts.models, "fortunes.gguf"))
        r = self.call("POST", "/v2/repository/models/chat/load", ADMIN,
                      json_body={"parameters": {"config": "name: chat\nformat: gguf\npath: fortunes.gguf\n"}}, timeout=300)
        self.assertEqual(r.status_code, 200, r.text)
        prompt = ("Do not take life too seriously. You will never get out of it alive. The only way to have a friend "
                  "is to be one. A man who has no imagination has no wings. ")

        def gen(key, headers=None):
            h = dict(headers or {})
            r = self.call("POST", "/v2/models/chat/generate", key, headers=h,
                          json_body={"text_input": prompt, "max_tokens": 1})
            self.assertEqual(r.status_code, 200, r.text)

        def hits():
            st = self.call("GET", "/v2/models/chat/stats", ADMIN).json()["model_stats"][0]["generation"]
            return st["prefix_cache"]["hits"]

        gen(T1_INV)
        before = hits()
        gen(T1_INV)
        self.assertGreater(hits(), before, "the same tenant reuses its blocks")
        before = hits()
        gen(T2_INV)
        self.assertEqual(hits(), before, "t2 reused t1's blocks")
        gen(T2_INV, {"tenant": "t1"})  # a header cannot claim another tenant's key
        gen(T2_INV, {"tenant": "t1"})
        after_t2 = hits()
        gen(T3_INV, {"tenant": "t2"})
        self.assertEqual(hits(), after_t2, "t3 reached t2's blocks through the tenant header")


class ReloadTests(unittest.TestCase):
    """SIGHUP reads the keys again: a new key works, a removed one stops."""

    def test_sighup_reloads_keys(self):
        tmp = tempfile.mkdtemp(prefix="mcp-e2e-tenants-reload-")
        self.addCleanup(shutil.rmtree, tmp, True)
        t = TenantServer(tmp)
        server = ts.Server(*t.args()).start()
        self.addCleanup(server.kill)
        new_key = "key-t1-new-invoker-0001"
        self.assertEqual(ts.http(server, "GET", "/v2/models/digits", headers=bearer(new_key)).status_code, 401)
        with open(os.path.join(tmp, "keys.yaml"), "w") as f:
            f.write(f"- {{sha256: {hashlib.sha256(new_key.encode()).hexdigest()}, tenant: t1, roles: [invoker]}}\n")
        import signal
        server.signal(signal.SIGHUP)
        ts.wait_for(lambda: ts.http(server, "GET", "/v2/models/digits", headers=bearer(new_key)).status_code == 200,
                    "the new key after SIGHUP")
        self.assertEqual(ts.http(server, "GET", "/v2/models/digits", headers=bearer(T1_INV)).status_code, 401)
        # A broken file leaves the rules in force.
        with open(os.path.join(tmp, "keys.yaml"), "w") as f:
            f.write("- {sha256: nothex, roles: [invoker]}\n")
        server.signal(signal.SIGHUP)
        ts.wait_for(lambda: "did not change" in server.stderr_text(), "the refused reload in the log")
        self.assertEqual(ts.http(server, "GET", "/v2/models/digits", headers=bearer(new_key)).status_code, 200)
        self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    unittest.main()
