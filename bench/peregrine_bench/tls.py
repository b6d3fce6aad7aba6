"""TLS for the tls_* and h2_* scenarios: the one certificate every server uses, and the start-up
check over TLS (with the ALPN protocol the server selected)."""

import os
import shutil
import socket
import ssl

from .common import BenchError
from .procs import parse_response, run_cmd


def make_certificate(directory):
    """An ECDSA P-256 self-signed certificate for localhost and 127.0.0.1, made with the openssl
    CLI once per run. Returns (certificate path, key path)."""
    openssl = shutil.which("openssl")
    if not openssl:
        raise BenchError("openssl not found (Debian package openssl): needed for the TLS scenarios")
    os.makedirs(directory, exist_ok=True)
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    rc, out, err = run_cmd([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                            "-nodes", "-subj", "/CN=localhost", "-addext",
                            "subjectAltName=DNS:localhost,IP:127.0.0.1", "-days", "30",
                            "-keyout", key, "-out", cert], 60)
    if rc != 0:
        raise BenchError(f"openssl could not make the certificate: {err.strip()}")
    os.chmod(key, 0o644)  # servers that drop privileges must read it (a throw-away test key)
    return cert, key


def https_get(port, path, alpn=("h2", "http/1.1"), timeout=5.0):
    """GET over TLS (HTTP/1.1, Connection: close) after a handshake offering `alpn`.
    Returns (status, headers dict, body, {"alpn", "version", "cipher"}). A server that selects
    h2 is checked for that and then asked again offering only http/1.1."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(list(alpn))
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            info = {"alpn": s.selected_alpn_protocol(), "version": s.version(), "cipher": s.cipher()[0]}
            if info["alpn"] == "h2":
                return (None, {}, b"", info)
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n\r\n".encode())
            data = bytearray()
            while True:
                try:
                    chunk = s.recv(65536)
                except (ssl.SSLEOFError, ConnectionResetError):
                    break
                if not chunk:
                    break
                data += chunk
    status, h, body = parse_response(bytes(data), path + " over TLS")
    return status, h, body, info
