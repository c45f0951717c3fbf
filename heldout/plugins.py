"""Plug-ins found by name: agent kinds, sandbox backends and task kinds are each a Registry.

A plug-in is a name, a "module:attribute" (a factory, or for a task kind the kind itself) and
the pydantic model of that module that the plug-in's settings must pass. The module is imported
on first use, so choosing one plug-in never pays for the imports of the others (the docker SDK,
an HTTP client), and adding one is a registry entry plus its module. A registry refuses an
unknown name naming the choices, and settings that the model refuses naming each field, dotted
when it is nested.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, ValidationError

from heldout.errors import HeldoutError, not_a_field


@dataclass(frozen=True)
class Plugin:
    """`target` is "module:attribute": a factory called with the validated settings, or the
    plug-in itself (a task kind). `settings` names the model, in the same module, that the
    settings must pass (a task kind's: the schema of its tasks)."""

    name: str
    target: str
    settings: str

    @property
    def module(self) -> str:
        return self.target.split(":")[0]

    def load(self) -> Any:
        return self._from_module(self.target.split(":")[1])

    def settings_model(self) -> type[BaseModel]:
        return self._from_module(self.settings)

    def _from_module(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self.module), attribute)

    def validate(self, settings: Mapping[str, Any]) -> BaseModel:
        model = self.settings_model()
        try:
            return model.model_validate(settings)
        except ValidationError as error:
            raise InvalidSettings(self.name, tuple(model.model_fields), error) from None

    def create(self, settings: Mapping[str, Any], *args: Any) -> Any:
        """What the factory makes of the validated settings (and of `args`)."""
        return self.load()(self.validate(settings), *args)


class UnknownPlugin(HeldoutError):
    def __init__(self, noun: str, name: object, choices: tuple[str, ...]):
        self.name = name
        self.choices = choices
        super().__init__(f"unknown {noun} {name!r}; choose one of {', '.join(choices)}")


@dataclass(frozen=True)
class SettingProblem:
    field: str  # dotted: "options.suffix"
    message: str
    type: str  # pydantic's error type, e.g. "extra_forbidden" for a setting the model lacks


class InvalidSettings(HeldoutError):
    """Settings the plug-in's model refused: every problem at once, each naming its field."""

    def __init__(self, plugin: str, fields: tuple[str, ...], error: ValidationError):
        self.plugin = plugin
        self.fields = fields
        self.problems = [SettingProblem(
            ".".join(map(str, detail["loc"])),
            not_a_field(str(detail["loc"][-1]), fields) if detail["type"] == "extra_forbidden"
            and len(detail["loc"]) == 1 else detail["msg"], detail["type"])
            for detail in error.errors()]
        super().__init__(self.render(f"{plugin}: "))

    def render(self, prefix: str) -> str:
        """One line a problem, each its field after `prefix` (which says where the settings
        were written)."""
        return "\n".join(f"{prefix}{problem.field}: {problem.message}"
                         for problem in self.problems)

    def unknown_fields(self) -> list[str]:
        return sorted(p.field for p in self.problems if p.type == "extra_forbidden")


class Registry:
    """Plug-ins of one sort by name; iterating it gives the names, in the order registered."""

    def __init__(self, noun: str, plugins: Iterable[Plugin]):
        self.noun = noun
        self._plugins = {plugin.name: plugin for plugin in plugins}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._plugins)

    def __iter__(self) -> Iterator[str]:
        return iter(self._plugins)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._plugins

    def __getitem__(self, name: str) -> Plugin:
        if name not in self:
            raise UnknownPlugin(self.noun, name, self.names)
        return self._plugins[name]

    def create(self, name: str, settings: Mapping[str, Any], *args: Any) -> Any:
        return self[name].create(settings, *args)


def gone(message: str) -> Any:
    """The type of a settings field that is no more: any value given for it is refused with
    `message` (where it went), under the field's own name."""

    def refuse(value: Any) -> None:
        raise ValueError(message)

    return Annotated[None, BeforeValidator(refuse), Field(exclude=True)]
