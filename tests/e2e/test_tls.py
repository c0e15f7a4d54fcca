#!/usr/bin/python3
"""TLS end to end (issue 14): HTTPS checked with curl and gRPC over TLS
with grpcio; client certificates that identify a tenant, and ones refused
(issued by another CA, expired, none where one is required); certificates
read again on SIGHUP. The certificates are made at test time with Debian's
python3-cryptography.

Run one class by hand:
  MCP_SERVER_BIN=build/bin/mcp2026-server MCPCTL_BIN=build/bin/mcpctl \\
    /usr/bin/python3 -m unittest -v test_tls.TlsTests
"""
import datetime
import hashlib
import os
import re
import shutil
import signal
import ssl
import subprocess
import tempfile
import threading
import time
import unittest
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

import test_grpc as tg
import test_server as ts

ADMIN_KEY = "tls-admin-key-000001"


def setUpModule():
    tg.setUpModule()


def tearDownModule():
    tg.tearDownModule()


def now():
    return datetime.datetime.now(datetime.timezone.utc)


def make_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(cn):
    key = make_key()
    cert = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(name(cn)).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now() - datetime.timedelta(days=1))
            .not_valid_after(now() + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def issue(ca, cn, server=False, before=None, after=None):
    ca_key, ca_cert = ca
    key = make_key()
    b = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(ca_cert.subject).public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(before or now() - datetime.timedelta(days=1))
         .not_valid_after(after or now() + datetime.timedelta(days=30)))
    if server:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                         x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                            critical=False)
    return key, b.sign(ca_key, hashes.SHA256())


def write_pair(folder, stem, pair):
    key, cert = pair
    kp, cp = os.path.join(folder, stem + ".key"), os.path.join(folder, stem + ".pem")
    with open(kp, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                  serialization.NoEncryption()))
    with open(cp, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    return cp, kp


class TlsServer:
    """mcp2026-server with TLS, its https:// port parsed from its log."""

    def __init__(self, *args):
        self.args = [str(a) for a in args]
        self.lines = []
        self.port = None
        self.proc = None

    def start(self):
        cmd = [ts.SERVER_BIN, *self.args, "--host", "127.0.0.1", "--port", "0"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        cond = threading.Condition()

        def read():
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace")
                with cond:
                    self.lines.append(line)
                    m = re.search(r"listening on https://127\.0\.0\.1:(\d+)", line)
                    if m:
                        self.port = int(m.group(1))
                    cond.notify_all()
            self.proc.stderr.close()
            with cond:
                cond.notify_all()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 60
        with cond:
            while self.port is None and self.proc.poll() is None and time.monotonic() < deadline:
                cond.wait(0.1)
        if self.port is None:
            self.kill()
            raise AssertionError("TLS server did not start:\n" + "".join(self.lines))
        return self

    def log(self):
        return "".join(self.lines)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.kill()
            return None


class TlsTests(unittest.TestCase):
    """One server with TLS on HTTP and gRPC, client certificates optional;
    alice's certificate (from the client CA) maps to tenant t1."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="mcp-e2e-tls-")
        d = cls.dir
        cls.ca = make_ca("MCP test CA")
        cls.other_ca = make_ca("Someone else's CA")
        cls.ca_pem = os.path.join(d, "ca.pem")
        with open(cls.ca_pem, "wb") as f:
            f.write(cls.ca[1].public_bytes(serialization.Encoding.PEM))
        cls.cert, cls.key = write_pair(d, "server", issue(cls.ca, "localhost", server=True))
        cls.alice = write_pair(d, "alice", issue(cls.ca, "alice"))
        cls.mallory = write_pair(d, "mallory", issue(cls.other_ca, "alice"))
        cls.expired = write_pair(d, "expired", issue(cls.ca, "alice", before=now() - datetime.timedelta(days=10),
                                                     after=now() - datetime.timedelta(days=1)))
        models = os.path.join(d, "models")
        os.mkdir(models)
        shutil.copy(ts.DIGITS, os.path.join(models, "digits.onnx"))
        with open(os.path.join(d, "server.yaml"), "w") as f:
            f.write(f"""auth:
  api_keys:
    - {{sha256: {hashlib.sha256(ADMIN_KEY.encode()).hexdigest()}, subject: ops, roles: [admin]}}
  client_certificates:
    - {{cn: alice, tenant: t1, roles: [invoker]}}
""")
        cls.grpc_port = tg.free_port()
        cls.server = TlsServer("--config", os.path.join(d, "server.yaml"), "--model-root", models,
                               "--tls-cert", cls.cert, "--tls-key", cls.key, "--tls-client-ca", cls.ca_pem,
                               "--grpc-port", cls.grpc_port).start()
        cls.url = f"https://127.0.0.1:{cls.server.port}"
        r = cls.curl_cls("-X", "POST", "-H", f"Authorization: Bearer {ADMIN_KEY}", "-H", "Content-Type: application/json",
                         "--data", '{"parameters": {"config": "name: t1/digits\\nformat: onnx\\npath: digits.onnx\\n"}}',
                         "/v2/repository/models/t1/digits/load")
        if r[0] != 200:
            cls.server.kill()
            raise AssertionError(f"admin load over HTTPS: {r}")

    @classmethod
    def tearDownClass(cls):
        try:
            cls.server.stop()
        finally:
            shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def curl_cls(cls, *args, cert=None):
        path = args[-1]
        cmd = ["curl", "-sS", "--max-time", "30", "--cacert", cls.ca_pem, "-o", "-", "-w", "\n%{http_code}"]
        if cert:
            cmd += ["--cert", cert[0], "--key", cert[1]]
        cmd += list(args[:-1]) + [cls.url + path]
        p = subprocess.run(cmd, capture_output=True, timeout=60)
        out = p.stdout.decode(errors="replace")
        body, _, code = out.rpartition("\n")
        return int(code or 0), body, p.stderr.decode(errors="replace"), p.returncode

    def curl(self, path, cert=None, *args):
        return self.curl_cls(*args, path, cert=cert)

    def test_https_serves_and_plain_http_is_refused_on_the_tls_port(self):
        code, body, _, _ = self.curl("/v2/health/ready")
        self.assertEqual((code, body), (200, '{"ready":true}'))
        p = subprocess.run(["curl", "-sS", "--max-time", "10", f"http://127.0.0.1:{self.server.port}/v2/health/ready"],
                           capture_output=True, timeout=30)
        self.assertNotEqual(p.returncode, 0, "plain HTTP was answered on the TLS port")
        # curl checks the server's certificate against the CA: another CA fails.
        other = os.path.join(self.dir, "other-ca.pem")
        with open(other, "wb") as f:
            f.write(self.other_ca[1].public_bytes(serialization.Encoding.PEM))
        p = subprocess.run(["curl", "-sS", "--max-time", "10", "--cacert", other, self.url + "/v2/health/ready"],
                           capture_output=True, timeout=30)
        self.assertNotEqual(p.returncode, 0)

    def test_client_certificate_identifies_its_tenant(self):
        code, body, _, _ = self.curl("/v2/models/t1/digits", self.alice)
        self.assertEqual(code, 200, body)
        self.assertEqual(self.curl("/v2/models/t1/digits")[0], 401)  # no credential at all

    def test_refused_client_certificates(self):
        for what, pair, why in (("another CA's", self.mallory, "not issued by a CA"),
                                ("an expired", self.expired, "expired")):
            code, body, err, rc = self.curl("/v2/models/t1/digits", pair)
            self.assertEqual(code, 401, f"{what} certificate: {code} {body} {err}")
            self.assertIn(why, body, what)

    def grpc_channel(self, pair=None):
        def read(path):
            with open(path, "rb") as f:
                return f.read()
        root = read(self.ca_pem)
        key = read(pair[1]) if pair else None
        chain = read(pair[0]) if pair else None
        creds = tg.grpc.ssl_channel_credentials(root_certificates=root, private_key=key, certificate_chain=chain)
        return tg.grpc.secure_channel(f"127.0.0.1:{self.grpc_port}", creds,
                                      options=[("grpc.ssl_target_name_override", "localhost")])

    def test_stalled_and_garbage_handshakes_block_no_one(self):
        """Clients that open the TLS ports and then stall mid-handshake, or
        send bytes that are not TLS, hold no thread others need."""
        import socket
        held = []
        try:
            for port in (self.server.port, self.grpc_port):
                for payload in (b"", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", b"GET / HTTP/1.1\r\n\r\n" * 4,
                                os.urandom(512)):
                    for _ in range(4):
                        c = socket.create_connection(("127.0.0.1", port), timeout=10)
                        if payload:
                            c.sendall(payload)
                        held.append(c)
            code, body, _, _ = self.curl("/v2/health/ready")
            self.assertEqual((code, body), (200, '{"ready":true}'))
            with self.grpc_channel(self.alice) as ch:
                stub = tg.pb_grpc.GRPCInferenceServiceStub(ch)
                self.assertTrue(stub.ServerLive(tg.pb.ServerLiveRequest(), timeout=30).live)
        finally:
            for c in held:
                c.close()
        self.assertIsNone(self.server.proc.poll(), "the server died:\n" + self.server.log())

    def test_grpc_over_tls(self):
        with self.grpc_channel(self.alice) as ch:
            stub = tg.pb_grpc.GRPCInferenceServiceStub(ch)
            m = stub.ModelMetadata(tg.pb.ModelMetadataRequest(name="t1/digits"), timeout=30)
            self.assertEqual(m.name, "t1/digits")
            r = stub.ModelInfer(tg.infer_request("t1/digits", "input", "FP32", ts.samples()[0], True), timeout=30)
            self.assertEqual(r.model_name, "t1/digits")
        with self.grpc_channel() as ch:  # no certificate: an API key works, nothing else does
            stub = tg.pb_grpc.GRPCInferenceServiceStub(ch)
            with self.assertRaises(tg.grpc.RpcError) as cm:
                stub.ModelMetadata(tg.pb.ModelMetadataRequest(name="t1/digits"), timeout=30)
            self.assertEqual(cm.exception.code(), tg.grpc.StatusCode.UNAUTHENTICATED)
            stub.ModelMetadata(tg.pb.ModelMetadataRequest(name="t1/digits"),
                               metadata=[("authorization", f"Bearer {ADMIN_KEY}")], timeout=30)
        for pair in (self.mallory, self.expired):
            with self.grpc_channel(pair) as ch:
                stub = tg.pb_grpc.GRPCInferenceServiceStub(ch)
                with self.assertRaises(tg.grpc.RpcError) as cm:
                    stub.ServerLive(tg.pb.ServerLiveRequest(), timeout=30)
                self.assertEqual(cm.exception.code(), tg.grpc.StatusCode.UNAVAILABLE, pair[0])


class TlsRequireTests(unittest.TestCase):
    """--tls-client-auth require: no certificate, no answer but 401; a
    new server certificate is served after SIGHUP."""

    def test_require_and_reload(self):
        d = tempfile.mkdtemp(prefix="mcp-e2e-tls-require-")
        self.addCleanup(shutil.rmtree, d, True)
        ca = make_ca("MCP test CA")
        ca_pem = os.path.join(d, "ca.pem")
        with open(ca_pem, "wb") as f:
            f.write(ca[1].public_bytes(serialization.Encoding.PEM))
        cert, key = write_pair(d, "server", issue(ca, "localhost", server=True))
        alice = write_pair(d, "alice", issue(ca, "alice"))
        with open(os.path.join(d, "server.yaml"), "w") as f:
            f.write("auth:\n  client_certificates:\n    - {cn: alice, subject: alice, roles: [admin]}\n")
        server = TlsServer("--config", os.path.join(d, "server.yaml"), "--model-path", ts.DIGITS, "--grpc-port", "0",
                           "--tls-cert", cert, "--tls-key", key, "--tls-client-ca", ca_pem,
                           "--tls-client-auth", "require").start()
        self.addCleanup(server.kill)
        url = f"https://127.0.0.1:{server.port}/v2/models/digits"
        base = ["curl", "-sS", "--max-time", "30", "--cacert", ca_pem, "-o", "/dev/null", "-w", "%{http_code}"]
        p = subprocess.run(base + [url], capture_output=True, timeout=60)
        self.assertEqual(p.stdout.decode(), "401")
        p = subprocess.run(base + ["--cert", alice[0], "--key", alice[1], url], capture_output=True, timeout=60)
        self.assertEqual(p.stdout.decode(), "200")

        def served_serial():
            pem = ssl.get_server_certificate(("127.0.0.1", server.port))
            return x509.load_pem_x509_certificate(pem.encode()).serial_number

        first = served_serial()
        new_cert = issue(ca, "localhost", server=True)
        write_pair(d, "server", new_cert)
        server.proc.send_signal(signal.SIGHUP)
        ts.wait_for(lambda: served_serial() == new_cert[1].serial_number, "the new certificate after SIGHUP")
        self.assertNotEqual(first, new_cert[1].serial_number)
        # A broken certificate file leaves the last good one in force.
        with open(os.path.join(d, "server.pem"), "w") as f:
            f.write("not a certificate\n")
        server.proc.send_signal(signal.SIGHUP)
        ts.wait_for(lambda: "the certificates did not change" in server.log(), "the refused reload in the log")
        self.assertEqual(served_serial(), new_cert[1].serial_number)
        self.assertEqual(server.stop(), 0)

    def test_bad_tls_settings_refuse_to_start(self):
        d = tempfile.mkdtemp(prefix="mcp-e2e-tls-bad-")
        self.addCleanup(shutil.rmtree, d, True)
        ca = make_ca("CA")
        cert, key = write_pair(d, "server", issue(ca, "localhost", server=True))
        _, other_key = write_pair(d, "other", issue(ca, "other"))
        expired_cert, expired_key = write_pair(d, "old", issue(ca, "localhost", before=now() - datetime.timedelta(days=9),
                                                                after=now() - datetime.timedelta(days=2)))
        for args, want in (([
            "--tls-cert", cert], "both --tls-cert and --tls-key"),
                ((["--tls-cert", cert, "--tls-key", other_key]), "is not the key of the certificate"),
                ((["--tls-cert", expired_cert, "--tls-key", expired_key]), "expired"),
                ((["--tls-cert", cert, "--tls-key", key, "--tls-client-auth", "require"]), "--tls-client-ca"),
                ((["--tls-cert", os.path.join(d, "none.pem"), "--tls-key", key]), "cannot read")):
            p = subprocess.run([ts.SERVER_BIN, "--model-path", ts.DIGITS, "--port", "0", "--grpc-port", "0", *args],
                               capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
            self.assertEqual(p.returncode, 2, (args, p.stderr.decode(errors="replace")))
            self.assertIn(want, p.stderr.decode(errors="replace"), args)


if __name__ == "__main__":
    unittest.main()
