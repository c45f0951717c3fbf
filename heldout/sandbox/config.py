"""Choosing and configuring a sandbox backend: the harness's sandbox section and the factory."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from heldout.errors import SandboxError
from heldout.plugins import InvalidSettings, Plugin, Registry
from heldout.sandbox.base import WALL_FACTOR
from heldout.sandbox.protocol import DEFAULT_IMAGE, Sandbox

# A backend's factory takes its validated settings and returns an open Sandbox. The docker
# backend's module is the only one that imports the docker SDK, and only whoever chooses it
# imports that module.
BACKENDS = Registry("sandbox backend", [
    Plugin("subprocess", "heldout.sandbox.subprocess:SubprocessSandbox", "SubprocessSettings"),
    Plugin("docker", "heldout.sandbox.docker:DockerSandbox", "DockerSettings"),
])


def make_sandbox(backend: str = "subprocess", **settings: Any) -> Sandbox:
    """A sandbox of the named backend. Settings: `workers`, `wall_factor` (both); `python`,
    `hidden_paths` (subprocess); `image`, `cpus`, `container_per` (docker)."""
    if backend not in BACKENDS:
        raise SandboxError(f"unknown sandbox backend {backend!r}; choose one of {BACKENDS.names}")
    try:
        return BACKENDS.create(backend, settings)
    except InvalidSettings as error:
        if unknown := error.unknown_fields():
            raise SandboxError(
                f"sandbox backend {backend!r} has no setting {', '.join(unknown)}; "
                f"it has {', '.join(sorted(error.fields))}"
            ) from None
        raise SandboxError(error.render(f"sandbox backend {backend!r}: ")) from None


class SandboxConfig(BaseModel):
    """The harness's sandbox section: part of the harness fingerprint, so every field is one
    that can change a score."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal[BACKENDS.names] = "subprocess"
    image: str = DEFAULT_IMAGE  # docker; a task's runtime.image overrides it
    memory_mb: int = Field(512, ge=64)
    cpus: float = Field(1.0, gt=0)  # docker
    workers: int = Field(2, ge=1)  # programs (subprocess) or containers (docker) at once
    network: Literal["none"] = "none"
    container_per: Literal["task", "program"] = "task"  # docker: a task's samples share one
    # The wall-clock backstop, in multiples of the CPU time limit (harness.timeout_s): it ends
    # a program that sleeps or blocks, and a timeout under it is one all the same.
    wall_factor: float = Field(WALL_FACTOR, ge=1)

    def open(self) -> Sandbox:
        return make_sandbox(self.backend, **self.model_dump(include=self._backend_fields()))

    def in_effect(self) -> dict[str, object]:
        """The fields that act on this backend, for a reader (the protocol card): the section
        holds every backend's settings, and a subprocess run has no image or cpus."""
        return self.model_dump(mode="json",
                               include={"backend", "memory_mb", "network", *self._backend_fields()})

    def _backend_fields(self) -> set[str]:
        # The section holds the settings of every backend; each is given those it has.
        return set(BACKENDS[self.backend].settings_model().model_fields)
