"""``serve`` lets no one in who doesn't belong: TLS (and mutual TLS) on every port, bearer tokens on OTLP
and ``/metrics``, probes open, files re-read without a restart. Real exporters against a real server
process; the certificates are made here (a CA, a server certificate for 127.0.0.1, client ones)."""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from otel_agent_eval.cli.main import build_parser
from tests.serve.server_process import ServerProcess, wait_for

TOKEN = "s3cret-token"


# --------------------------------------------------------------------------- certificates


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(subject: str, key: ec.EllipticCurvePrivateKey, issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
                 *, ca: bool = False, server: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder().subject_name(_name(subject))
        .issuer_name(issuer[0].subject if issuer else _name(subject))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        # The key identifiers Python 3.13's default verification (VERIFY_X509_STRICT) requires, as real CAs issue.
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            (issuer[1] if issuer else key).public_key()), critical=False)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
                          decipher_only=False), critical=True)
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


class PKI:
    """A CA with a server certificate (localhost, 127.0.0.1) and a client certificate, as PEM files."""

    def __init__(self, directory: Path, name: str = "test") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = _certificate(f"{name} CA", ca_key, None, ca=True)
        self.ca = self._write(directory / f"{name}-ca.pem", ca)
        server_key = ec.generate_private_key(ec.SECP256R1())
        self.server_cert = self._write(directory / f"{name}-server.pem", _certificate("localhost", server_key, (ca, ca_key), server=True))
        self.server_key = self._write_key(directory / f"{name}-server.key", server_key)
        client_key = ec.generate_private_key(ec.SECP256R1())
        self.client_cert = self._write(directory / f"{name}-client.pem", _certificate("client", client_key, (ca, ca_key)))
        self.client_key = self._write_key(directory / f"{name}-client.key", client_key)

    @staticmethod
    def _write(path: Path, cert: x509.Certificate) -> str:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return str(path)

    @staticmethod
    def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> str:
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        return str(path)


# --------------------------------------------------------------------------- helpers


def _spans(count: int) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("security")
    for _ in range(count):
        with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}):
            pass
    provider.shutdown()
    return list(memory.get_finished_spans())


def _https_get(port: int, path: str, ca: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(f"https://127.0.0.1:{port}{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    context = ssl.create_default_context(cafile=ca)
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _metric(text: bytes, name: str, **labels: str) -> float:
    total = 0.0
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def _http_exporter(server: ServerProcess, ca: str | None, token: str | None, **kwargs: str) -> HttpSpanExporter:
    scheme = "https" if ca else "http"
    return HttpSpanExporter(endpoint=f"{scheme}://127.0.0.1:{server.ports['http']}/v1/traces", certificate_file=ca,
                            headers={"authorization": f"Bearer {token}"} if token else None, timeout=5, **kwargs)


def _grpc_exporter(server: ServerProcess, ca: str | None, token: str | None,
                   client: tuple[str, str] | None = None) -> GrpcSpanExporter:
    credentials = None
    if ca:
        client_key = client_cert = None
        if client:
            client_cert, client_key = Path(client[0]).read_bytes(), Path(client[1]).read_bytes()
        credentials = grpc.ssl_channel_credentials(Path(ca).read_bytes(), client_key, client_cert)
    return GrpcSpanExporter(endpoint=f"localhost:{server.ports['grpc']}", insecure=ca is None, credentials=credentials,
                            headers=(("authorization", f"Bearer {token}"),) if token else None, timeout=3)


# --------------------------------------------------------------------------- tests


@pytest.fixture(autouse=True)
def _exporter_trusts_its_certificate_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """The HTTP exporter sets ``session.verify``, which requests overrides with ``REQUESTS_CA_BUNDLE``
    (or ``CURL_CA_BUNDLE``) from the environment (psf/requests#3829): without them, ``certificate_file`` counts."""
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)


def test_loopback_by_default_and_every_flag_has_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    args = build_parser().parse_args(["serve"])
    assert args.host == "127.0.0.1"
    assert args.tls_cert_file is None and args.bearer_token_file is None
    for name, value in {"HOST": "0.0.0.0", "TLS_CERT_FILE": "c.pem", "TLS_KEY_FILE": "k.pem",
                        "TLS_CLIENT_CA_FILE": "ca.pem", "BEARER_TOKEN_FILE": "t"}.items():
        monkeypatch.setenv(f"OTEL_AGENT_EVAL_SERVE_{name}", value)
    args = build_parser().parse_args(["serve"])
    assert (args.host, args.tls_cert_file, args.tls_key_file, args.tls_client_ca_file, args.bearer_token_file) == (
        "0.0.0.0", "c.pem", "k.pem", "ca.pem", "t")


def test_tls_and_bearer_token_with_the_real_exporters(tmp_path: Path) -> None:
    pki = PKI(tmp_path / "pki")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    server = ServerProcess(tmp_path, "--tls-cert-file", pki.server_cert, "--tls-key-file", pki.server_key,
                           "--bearer-token-file", str(token_file))
    try:
        admin = server.ports["admin"]
        # With the CA and the token: accepted on both transports.
        assert _http_exporter(server, pki.ca, TOKEN).export(_spans(3)) is SpanExportResult.SUCCESS
        assert _grpc_exporter(server, pki.ca, TOKEN).export(_spans(4)) is SpanExportResult.SUCCESS
        # Without the token, or a wrong one: refused (401 / UNAUTHENTICATED, not retried), and counted.
        assert _http_exporter(server, pki.ca, None).export(_spans(1)) is SpanExportResult.FAILURE
        assert _http_exporter(server, pki.ca, "guess").export(_spans(1)) is SpanExportResult.FAILURE
        assert _grpc_exporter(server, pki.ca, None).export(_spans(1)) is SpanExportResult.FAILURE
        assert _grpc_exporter(server, pki.ca, TOKEN + "x").export(_spans(1)) is SpanExportResult.FAILURE
        # Plain text to a TLS port: no connection at all.
        assert _http_exporter(server, None, TOKEN).export(_spans(1)) is SpanExportResult.FAILURE
        # Probes stay open; /metrics wants the token too.
        assert _https_get(admin, "/healthz", pki.ca) == (200, b"ok\n")
        assert _https_get(admin, "/readyz", pki.ca)[0] == 200
        assert _https_get(admin, "/metrics", pki.ca)[0] == 401
        status, metrics = _https_get(admin, "/metrics", pki.ca, TOKEN)
        assert status == 200
        assert _metric(metrics, "agent_eval_spans_received_total") == 7
        assert _metric(metrics, "agent_eval_server_auth_failures_total", transport="http", reason="missing") == 1
        assert _metric(metrics, "agent_eval_server_auth_failures_total", transport="http", reason="invalid") == 1
        assert _metric(metrics, "agent_eval_server_auth_failures_total", transport="grpc", reason="missing") == 1
        assert _metric(metrics, "agent_eval_server_auth_failures_total", transport="grpc", reason="invalid") == 1
        assert _metric(metrics, "agent_eval_server_auth_failures_total", transport="admin", reason="missing") == 1
        assert _metric(metrics, "agent_eval_server_requests_total", outcome="unauthenticated") == 4
    finally:
        server.kill()


def test_without_tls_or_token_the_exporters_need_neither(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path)
    try:
        assert _http_exporter(server, None, None).export(_spans(2)) is SpanExportResult.SUCCESS
        assert _grpc_exporter(server, None, None).export(_spans(2)) is SpanExportResult.SUCCESS
        assert server.metrics().sum("agent_eval_spans_received_total") == 4
        # /metrics itself answers (prometheus-client's app routed as is, no redirect to /metrics/)
        connection = http.client.HTTPConnection("127.0.0.1", server.ports["admin"], timeout=5)
        connection.request("GET", "/metrics")
        assert connection.getresponse().status == 200
        connection.close()
    finally:
        server.kill()


def test_mutual_tls_requires_a_client_certificate_from_the_ca(tmp_path: Path) -> None:
    pki, stranger = PKI(tmp_path / "pki"), PKI(tmp_path / "other", "stranger")
    server = ServerProcess(tmp_path, "--tls-cert-file", pki.server_cert, "--tls-key-file", pki.server_key,
                           "--tls-client-ca-file", pki.ca)
    try:
        ours, theirs = (pki.client_cert, pki.client_key), (stranger.client_cert, stranger.client_key)
        assert _http_exporter(server, pki.ca, None, client_certificate_file=ours[0],
                              client_key_file=ours[1]).export(_spans(2)) is SpanExportResult.SUCCESS
        assert _grpc_exporter(server, pki.ca, None, client=ours).export(_spans(3)) is SpanExportResult.SUCCESS
        assert _http_exporter(server, pki.ca, None).export(_spans(1)) is SpanExportResult.FAILURE
        assert _http_exporter(server, pki.ca, None, client_certificate_file=theirs[0],
                              client_key_file=theirs[1]).export(_spans(1)) is SpanExportResult.FAILURE
        assert _grpc_exporter(server, pki.ca, None).export(_spans(1)) is SpanExportResult.FAILURE
        assert _grpc_exporter(server, pki.ca, None, client=theirs).export(_spans(1)) is SpanExportResult.FAILURE
        # The admin port asks for no client certificate: orchestrator probes have none.
        assert _https_get(server.ports["admin"], "/healthz", pki.ca)[0] == 200
        status, metrics = _https_get(server.ports["admin"], "/metrics", pki.ca)
        assert status == 200 and _metric(metrics, "agent_eval_spans_received_total") == 5
    finally:
        server.kill()


def test_certificates_and_tokens_are_reread_when_they_change(tmp_path: Path) -> None:
    old, new = PKI(tmp_path / "old", "old"), PKI(tmp_path / "new", "new")
    cert, key, token_file = tmp_path / "tls.crt", tmp_path / "tls.key", tmp_path / "token"
    cert.write_bytes(Path(old.server_cert).read_bytes())
    key.write_bytes(Path(old.server_key).read_bytes())
    token_file.write_text("first\n")
    server = ServerProcess(tmp_path, "--tls-cert-file", str(cert), "--tls-key-file", str(key),
                           "--bearer-token-file", str(token_file))
    try:
        assert _http_exporter(server, old.ca, "first").export(_spans(1)) is SpanExportResult.SUCCESS
        assert _http_exporter(server, new.ca, "first").export(_spans(1)) is SpanExportResult.FAILURE
        # Rotate: a new certificate from another CA, a new token (the old one kept for a while).
        time.sleep(1.1)
        cert.write_bytes(Path(new.server_cert).read_bytes())
        key.write_bytes(Path(new.server_key).read_bytes())
        token_file.write_text("second\nfirst\n")
        wait_for(lambda: _http_exporter(server, new.ca, "second").export(_spans(1)) is SpanExportResult.SUCCESS,
                 10, "the new certificate and token served")
        assert _grpc_exporter(server, new.ca, "second").export(_spans(1)) is SpanExportResult.SUCCESS
        assert _grpc_exporter(server, old.ca, "second").export(_spans(1)) is SpanExportResult.FAILURE
        assert _http_exporter(server, new.ca, "first").export(_spans(1)) is SpanExportResult.SUCCESS
        time.sleep(1.1)
        token_file.write_text("second\n")
        wait_for(lambda: _http_exporter(server, new.ca, "first").export(_spans(1)) is SpanExportResult.FAILURE,
                 10, "the retired token refused")
        assert _https_get(server.ports["admin"], "/metrics", new.ca, "second")[0] == 200
    finally:
        server.kill()


def test_deploy_manifests_bind_every_interface_explicitly_with_flags_serve_knows() -> None:
    """Loopback is the default, so the container manifests must ask for 0.0.0.0, with flags that parse."""
    import yaml

    root = Path(__file__).resolve().parents[2] / "deploy"
    compose = yaml.safe_load((root / "compose" / "docker-compose.yml").read_text())
    deployment = yaml.safe_load((root / "k8s" / "deployment.yaml").read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    for argv in (compose["services"]["otel-agent-eval"]["command"], container["args"]):
        args = build_parser().parse_args(argv)
        assert (args.command, args.host, args.admin_port) == ("serve", "0.0.0.0", 9464)
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
