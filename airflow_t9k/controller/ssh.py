"""SSH key pairs for launchers that reach their workers over SSH.

One Secret per job holds two ed25519 pairs: the launcher's user key and the workers' host key.
Each pod mounts only its part (kinds/ssh_launch.py ``ssh_items``): the launcher the private
user key, its client config and ``known_hosts``; a worker ``authorized_keys`` and the host
key its sshd serves. ``known_hosts`` names the host key for every host, so the launcher
checks that it talks to one of this job's workers (whoever holds this job's host key) instead
of accepting any key a look-alike Service name answers with.
"""

from __future__ import annotations

import base64

SSH_CONFIG = "Host *\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n"
USER_KEY = "id_ed25519"
HOST_KEY = "ssh_host_ed25519_key"


def _pair(comment: bytes) -> tuple[bytes, bytes]:
    # Imported here: cryptography adds about 7 MB to the process, and only the kinds that
    # launch over SSH (MPI, DeepSpeed) ever need a key; a controller that runs none never loads it.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public + b" " + comment + b"\n"


def ssh_secret_data() -> dict[str, str]:
    """Secret ``data`` (base64): a fresh user key with its authorized_keys and client config,
    and a fresh host key with the known_hosts line that trusts it for every host name."""
    user_private, user_public = _pair(b"airflow-t9k")
    host_private, host_public = _pair(b"airflow-t9k-host")
    files = {
        USER_KEY: user_private, f"{USER_KEY}.pub": user_public, "authorized_keys": user_public, "config": SSH_CONFIG.encode(),
        HOST_KEY: host_private, f"{HOST_KEY}.pub": host_public, "known_hosts": b"* " + host_public,
    }  # fmt: skip
    return {name: base64.b64encode(content).decode() for name, content in files.items()}
