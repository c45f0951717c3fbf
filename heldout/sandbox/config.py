"""Choosing and configuring a sandbox backend: the harness's sandbox section and the factory."""

from __future__ import annotations

import inspect
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from heldout.errors import SandboxError
from heldout.sandbox.protocol import DEFAULT_IMAGE, Sandbox

BACKENDS = ("subprocess", "docker")


def make_sandbox(backend: str = "subprocess", **settings: Any) -> Sandbox:
    """A sandbox of the named backend. Settings: `workers` (both); `python`, `hidden_paths`
    (subprocess); `image`, `cpus`, `container_per` (docker)."""
    if backend == "subprocess":
        from heldout.sandbox.subprocess import SubprocessSandbox

        factory: Any = SubprocessSandbox
    elif backend == "docker":
        # Imported only here: the docker SDK is needed only by those who choose this backend.
        from heldout.sandbox.docker import DockerSandbox

        factory = DockerSandbox
    else:
        raise SandboxError(f"unknown sandbox backend {backend!r}; choose one of {BACKENDS}")
    known = set(inspect.signature(factory).parameters) - {"client"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise SandboxError(
            f"sandbox backend {backend!r} has no setting {', '.join(unknown)}; "
            f"it has {', '.join(sorted(known))}"
        )
    return factory(**settings)


class SandboxConfig(BaseModel):
    """The harness's sandbox section: part of the harness fingerprint, so every field is one
    that can change a score."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["subprocess", "docker"] = "subprocess"
    image: str = DEFAULT_IMAGE  # docker; a task's runtime.image overrides it
    memory_mb: int = Field(512, ge=64)
    cpus: float = Field(1.0, gt=0)  # docker
    workers: int = Field(2, ge=1)  # programs (subprocess) or containers (docker) at once
    network: Literal["none"] = "none"
    container_per: Literal["task", "program"] = "task"  # docker: a task's samples share one

    def open(self) -> Sandbox:
        if self.backend == "docker":
            return make_sandbox(
                "docker",
                image=self.image,
                cpus=self.cpus,
                workers=self.workers,
                container_per=self.container_per,
            )
        return make_sandbox("subprocess", workers=self.workers)
