"""The ``Version`` type and the parser."""

import re
from dataclasses import dataclass

_PATTERN = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


class InvalidVersion(ValueError):
    """Raised for strings that are not semantic versions."""


@dataclass(frozen=True)
class Version:
    major: int
    minor: int
    patch: int
    prerelease: tuple = ()
    build: tuple = ()

    @property
    def core(self):
        return (self.major, self.minor, self.patch)

    def __str__(self):
        text = "{}.{}.{}".format(*self.core)
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text


def parse(text):
    """Parse ``"1.2.3-rc.1+build.5"`` into a ``Version``."""
    if isinstance(text, Version):
        return text
    match = _PATTERN.match(text.strip())
    if not match:
        raise InvalidVersion(f"not a semantic version: {text!r}")
    major, minor, patch, pre, build = match.groups()
    prerelease = tuple(pre.split(".")) if pre else ()
    for identifier in prerelease:
        if identifier.isdigit() and identifier != "0" and identifier.startswith("0"):
            raise InvalidVersion(f"leading zero in {identifier!r} of {text!r}")
    build_parts = tuple(build.split(".")) if build else ()
    return Version(int(major), int(minor), int(patch), prerelease, build_parts)
