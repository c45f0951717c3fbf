"""Sandboxes: the result record and protocol (`protocol`), the backend factory and the
harness's sandbox section (`config`), and the two backends (`subprocess`, `docker`), which
both run a program through `runner.py`, a judged one as a candidate and a judge (`roles.py`)
speaking plain data (`codec.py`). The names below are the public API the README documents."""

from heldout.sandbox.config import BACKENDS, SandboxConfig, make_sandbox
from heldout.sandbox.protocol import DEFAULT_IMAGE, ExecResult, Program, Sandbox, Status

__all__ = ["BACKENDS", "DEFAULT_IMAGE", "ExecResult", "Program", "Sandbox", "SandboxConfig",
           "Status", "make_sandbox"]
