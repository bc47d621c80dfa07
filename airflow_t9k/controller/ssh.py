"""SSH key pairs for launchers that reach their workers over SSH."""

from __future__ import annotations

import base64

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

SSH_CONFIG = "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"


def ssh_secret_data() -> dict[str, str]:
    """Secret ``data`` (base64) with a fresh ed25519 key, its authorized_keys and a client config."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH) + b" airflow-t9k\n"
    files = {"id_ed25519": private, "id_ed25519.pub": public, "authorized_keys": public, "config": SSH_CONFIG.encode()}
    return {name: base64.b64encode(content).decode() for name, content in files.items()}
