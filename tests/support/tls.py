"""A real TLS handshake on the loopback, for tests of the certificates the controller serves."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path


def handshake(cert: bytes, key: bytes, trusted: bytes, host: str, tmp: Path) -> None:
    """A server with ``cert``/``key``, a client trusting ``trusted`` (a CA bundle, as a pod gets
    it) and verifying ``host``. Returns when the client read the server's bytes; raises what the
    client met (``ssl.SSLCertVerificationError`` for a certificate it does not trust)."""
    (tmp / "tls.crt").write_bytes(cert)
    (tmp / "tls.key").write_bytes(key)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp / "tls.crt", tmp / "tls.key")
    client_ctx = ssl.create_default_context(cadata=trusted.decode())
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            conn, _ = listener.accept()
            try:
                with server_ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"ok")
            except (ssl.SSLError, OSError):
                pass  # the client refused the certificate: what it raises is the answer

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        try:
            with socket.create_connection(("127.0.0.1", port)) as raw, client_ctx.wrap_socket(raw, server_hostname=host) as tls:
                assert tls.recv(2) == b"ok"
        finally:
            t.join(5)
