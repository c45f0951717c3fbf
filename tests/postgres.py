"""A PostgreSQL server of a test's own: Debian's package, `initdb` and `pg_ctl` in a temporary
folder, run as `nobody` when the tests run as root, listening on 127.0.0.1 at a free port and
on a unix socket in that folder. Skips, saying why, where PostgreSQL or psycopg is missing."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

INSTALL = "install Debian's package: apt-get install -y postgresql (.ci/run does)"


def server_program(name: str) -> str | None:
    """Debian keeps initdb and pg_ctl in /usr/lib/postgresql/<version>/bin, off the PATH."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def postgres_server() -> Iterator[str]:
    """A running server; yields the URL of an empty database `ledger` on it."""
    pytest.importorskip("psycopg", reason="PostgreSQL tests need psycopg 3: pip install "
                                          "'psycopg[binary]'")
    initdb, pg_ctl = server_program("initdb"), server_program("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip(f"no PostgreSQL server programs (initdb, pg_ctl): {INSTALL}")
    folder = Path(tempfile.mkdtemp(prefix="heldout-pg-", dir="/tmp"))
    as_user: list[str] = []
    if os.getuid() == 0:  # postgres refuses to run as root
        nobody = pwd.getpwnam("nobody")
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
        as_user = ["runuser", "-u", "nobody", "--"]
    data, port = folder / "data", _free_port()

    def run(*command: str) -> None:
        done = subprocess.run([*as_user, *command], capture_output=True, text=True, timeout=180,
                              cwd=folder)
        if done.returncode != 0:
            pytest.skip(f"PostgreSQL could not be started here ({command[0]}): "
                        f"{(done.stderr or done.stdout).strip()[-400:]}")

    try:
        run(initdb, "-D", str(data), "-A", "trust", "-U", "heldout", "-N", "-E", "UTF8")
        run(pg_ctl, "-D", str(data), "-l", str(folder / "server.log"), "-w", "-t", "120",
            "-o", f"-k {folder} -p {port} -h 127.0.0.1 -c fsync=off -c max_connections=50",
            "start")
        import psycopg

        with psycopg.connect(f"postgresql://heldout@127.0.0.1:{port}/postgres",
                             autocommit=True) as connection:
            connection.execute("CREATE DATABASE ledger")
        yield f"postgresql://heldout@127.0.0.1:{port}/ledger"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=120, cwd=folder)
        shutil.rmtree(folder, ignore_errors=True)
