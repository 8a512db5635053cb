"""The bounded downloader keeps a bearer token on the connection it was meant for (#34.11).

A file host that answers https://host:port/... with a redirect to http://host:port/... (same host
and port, plain text) must not receive the token in clear. The host here speaks TLS and plain
HTTP on one port (told apart by the first byte); the download runs in its own process, trusting
the test's self-signed certificate through SSL_CERT_FILE as any deployment would trust its CA.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "xoxb-secret-token-4711"


class TwoFacedHost:
    """TLS and plain HTTP on one 127.0.0.1 port: the TLS side redirects to the plain side."""

    def __init__(self, folder: Path) -> None:
        cert, key = folder / "cert.pem", folder / "key.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                        str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True)
        self.cert = cert
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(cert, key)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests: list[tuple[str, str]] = []  # (scheme, request head)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                secure = conn.recv(1, socket.MSG_PEEK) == b"\x16"  # a TLS handshake record
                stream = self.tls.wrap_socket(conn, server_side=True) if secure else conn
                head = b""
                while b"\r\n\r\n" not in head and (more := stream.recv(4096)):
                    head += more
                self.requests.append(("https" if secure else "http", head.decode("latin-1")))
                if secure:
                    answer = f"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{self.port}/file\r\nContent-Length: 0\r\n"
                else:
                    answer = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                stream.sendall((answer + "Connection: close\r\n\r\n" + ("" if secure else "bytes")).encode())

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[TwoFacedHost]:
    server = TwoFacedHost(tmp_path)
    yield server
    server.close()


def test_a_redirect_from_https_to_http_on_the_same_host_drops_the_token(host: TwoFacedHost) -> None:
    script = ("import asyncio, sys\nfrom channels.download import download\n"
              "print(asyncio.run(download(sys.argv[1], name='a.txt', max_bytes=100, platform='Slack',"
              f" headers={{'Authorization': 'Bearer {TOKEN}'}})).decode())")
    done = subprocess.run([sys.executable, "-c", script, f"https://127.0.0.1:{host.port}/file"], cwd=ROOT,
                          env={**os.environ, "SSL_CERT_FILE": str(host.cert)}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "bytes\n"
    assert [scheme for scheme, _head in host.requests] == ["https", "http"]
    assert f"Bearer {TOKEN}" in host.requests[0][1]  # the token went where it was meant to, encrypted
    assert TOKEN not in host.requests[1][1]  # and not in clear text to the same host and port
