"""The SSH Secret's keys, checked with OpenSSH's own tools: the launcher trusts exactly the
host key the job's workers serve, and checks it."""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_t9k.controller.ssh import ssh_secret_data
from airflow_t9k.kinds.ssh_launch import LAUNCHER_FILES, SSHD_FILES

# OpenSSH's client tools are required (Debian: openssh-client); a missing one fails, not skips.
assert shutil.which("ssh-keygen"), "these tests need openssh-client (ssh, ssh-keygen)"
assert shutil.which("ssh"), "these tests need openssh-client (ssh, ssh-keygen)"


@pytest.fixture
def ssh_dir(tmp_path: Path) -> Path:
    for name, value in ssh_secret_data().items():
        (tmp_path / name).write_bytes(base64.b64decode(value))
        (tmp_path / name).chmod(0o600)
    return tmp_path


def _public(path: Path) -> str:
    out = subprocess.run(["ssh-keygen", "-y", "-f", str(path)], capture_output=True, text=True, check=True).stdout
    return " ".join(out.split()[:2])


def test_known_hosts_trusts_the_host_key_for_any_worker_name(ssh_dir: Path):
    host = _public(ssh_dir / "ssh_host_ed25519_key")
    for name in ("mpi-worker-0", "ds-worker-12.ns.svc"):
        found = subprocess.run(
            ["ssh-keygen", "-F", name, "-f", str(ssh_dir / "known_hosts")], check=False, capture_output=True, text=True
        )
        assert found.returncode == 0, found
        assert host in found.stdout, found


def test_authorized_keys_is_the_users_key_and_the_two_keys_differ(ssh_dir: Path):
    user = _public(ssh_dir / "id_ed25519")
    assert (ssh_dir / "authorized_keys").read_text().startswith(user)
    assert user != _public(ssh_dir / "ssh_host_ed25519_key")


def test_the_client_config_checks_host_keys(ssh_dir: Path):
    out = subprocess.run(["ssh", "-G", "-F", str(ssh_dir / "config"), "mpi-worker-0"], capture_output=True, text=True, check=True)
    assert "stricthostkeychecking true" in out.stdout.lower() or "stricthostkeychecking yes" in out.stdout.lower()
    assert "userknownhostsfile /dev/null" not in out.stdout.lower()


def test_what_each_side_mounts():
    keys = set(ssh_secret_data())
    assert set(LAUNCHER_FILES) <= keys
    assert set(SSHD_FILES) <= keys
    assert "id_ed25519" not in SSHD_FILES
    assert "ssh_host_ed25519_key" not in LAUNCHER_FILES


def test_the_controller_loads_cryptography_only_when_it_makes_a_key() -> None:
    """cryptography costs the process about 7 MB; a controller running no SSH launcher never
    needs it (issue 32: peak memory at most Kubeflow's)."""
    probe = ("import sys, airflow_t9k.controller.cli; assert 'cryptography' not in sys.modules, 'loaded at import'; "
             "from airflow_t9k.controller.ssh import ssh_secret_data; ssh_secret_data(); "
             "assert 'cryptography' in sys.modules")  # fmt: skip
    subprocess.run([sys.executable, "-c", probe], check=True)
