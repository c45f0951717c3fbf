"""The harness sweep: how much a number moves when one field of the pinned harness changes.

A setting is the pinned harness (params.harness, its `n` replaced by the sweep's) with exactly
one field changed, or the pinned harness itself, the baseline every setting is compared with.
Every setting keeps the pinned seed, so on each task every setting draws the same random
numbers (common random numbers): a setting's paired difference from the pinned one is what the
changed field did, plus whatever of the harness drifted. A fixed reference policy, run under
every setting, tells the two apart: where it should be invariant to a field (a single-shot
policy ignores max_turns and temperature) it must stay put; if it moves, something other than
the field moved (the sandbox, the scorer).

Pure: plans and verdicts only. The stage (stages/sensitivity.py) rolls out and computes the
intervals; here an interval is anything with `low` and `high`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from heldout.episodes.harness import Harness
from heldout.errors import ParamsError

PINNED = "pinned"
PARAMS_PATH = "params.yaml: sensitivity"
STAYED_PUT, MOVED = "stayed put", "moved"

# Harness fields a sweep refuses to change, and why.
UNSWEPT = {
    "n": "episodes per task set how precise a number is, not what it measures; the sweep's own "
         "n is sensitivity.n",
    "seed": "a new seed is a rerun (params.reruns measures that noise), not another harness; "
            "every setting keeps the pinned seed so settings are compared on the same random "
            "numbers",
    "sandbox": "it says where programs run, and is a section of its own, not one field; a sandbox "
               "that drifts shows as the reference moving",
    "scorer_version": "the task kind's scorer fixes it; numbers under two scorers are not one "
                      "measurement",
}


class SensitivityConfig(BaseModel):
    """`params.sensitivity`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    checkpoints: list[str] = Field(
        default_factory=list, description="names of params.checkpoints to sweep")
    reference: dict[str, Any] = Field(
        description="a fixed reference policy ({agent: <kind>, ...}), run under every setting")
    reference_invariant_to: list[str] | None = Field(
        default=None,
        description="swept fields the reference should ignore (default: every swept field); "
                    "its verdict reads only their settings")
    n: int | None = Field(
        default=None, ge=1, description="episodes per task per setting (default: harness.n)")
    fields: dict[str, Any] = Field(
        default_factory=dict, description="harness field -> list of values to try, one at a time")


@dataclass(frozen=True)
class Setting:
    """One harness of the sweep: `field` set to `value` (None, None for the pinned one)."""

    name: str
    field: str | None
    value: Any
    pinned_value: Any
    harness: Harness

    @property
    def fingerprint(self) -> str:
        return self.harness.fingerprint()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "field": self.field, "value": self.value,
                "pinned_value": self.pinned_value, "harness": self.fingerprint}


class Bounds(Protocol):
    """An interval: heldout.statistics.intervals.Interval, say."""

    estimate: float
    low: float
    high: float


def sweep_base(pinned: Harness, n: int | None) -> Harness:
    """The pinned harness at the sweep's n: the baseline setting (its own fingerprint unless
    n is the pinned n)."""
    return pinned if n is None else pinned.model_copy(update={"n": n})


def plan_settings(pinned: Harness, fields: Mapping[str, Any], n: int | None = None
                  ) -> list[Setting]:
    """The pinned setting, then each field's values in order, each changing that field alone.
    A value equal to the pinned one is the pinned setting (run once); repeated values run once.
    Raises ParamsError naming `params.yaml: sensitivity.fields.<name>` for an unknown field, a
    field the sweep refuses, or a value the Harness model refuses."""
    if not isinstance(fields, Mapping) or not fields:
        raise ParamsError(f"{PARAMS_PATH}.fields: expected a mapping of harness fields to "
                          "lists of values, e.g. {max_turns: [2, 3]}")
    base = sweep_base(pinned, n)
    dumped = base.model_dump()
    settings = [Setting(PINNED, None, None, None, base)]
    seen = {base.fingerprint()}
    for field, values in fields.items():
        path = f"{PARAMS_PATH}.fields.{field}"
        check_field(field, path)
        if not isinstance(values, list) or not values:
            raise ParamsError(f"{path}: expected a non-empty list of values to try, got "
                              f"{values!r}")
        pinned_value = base.model_dump(mode="json")[field]
        for index, value in enumerate(values):
            variant = validated_variant(dumped, field, value, f"{path}[{index}]")
            if variant.fingerprint() in seen:
                continue
            changed = harness_difference(base, variant)
            if set(changed) != {field}:  # a validator that rewrote another field
                raise ParamsError(f"{path}[{index}]: changes {', '.join(sorted(changed))}, "
                                  "not that field alone")
            seen.add(variant.fingerprint())
            shown = variant.model_dump(mode="json")[field]
            settings.append(Setting(setting_name(field, shown), field, shown, pinned_value,
                                    variant))
    return settings


def check_field(field: str, path: str) -> None:
    if field in UNSWEPT:
        raise ParamsError(f"{path}: the sweep does not change {field}: {UNSWEPT[field]}")
    if field not in Harness.model_fields:
        sweepable = sorted(set(Harness.model_fields) - set(UNSWEPT))
        raise ParamsError(f"{path}: not a harness field; the fields a sweep may change are "
                          f"{', '.join(sweepable)}")


def validated_variant(dumped: dict[str, Any], field: str, value: Any, path: str) -> Harness:
    try:
        return Harness.model_validate({**dumped, field: value})
    except ValidationError as error:
        problems = "; ".join(detail["msg"] for detail in error.errors())
        raise ParamsError(f"{path}: {value!r} is not a valid harness.{field}: {problems}"
                          ) from None


def setting_name(field: str, value: Any) -> str:
    """`field=value`, the value as JSON (`tools=["submit"]`, `temperature=1.3`)."""
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return f"{field}={text}"


def harness_difference(pinned: Harness, other: Harness) -> dict[str, tuple[Any, Any]]:
    """The fields in which two harnesses differ: {field: (pinned value, other value)}."""
    a, b = pinned.model_dump(mode="json"), other.model_dump(mode="json")
    return {field: (a[field], b[field]) for field in a if a[field] != b[field]}


def invariant_fields(config: SensitivityConfig) -> list[str]:
    """The swept fields the reference's verdict reads. `reference_invariant_to` says what the
    reference ignores, whatever this sweep changes (a field not swept is not checked); a name
    that is no harness field is refused."""
    if config.reference_invariant_to is None:
        return list(config.fields)
    for field in config.reference_invariant_to:
        if field not in Harness.model_fields:
            raise ParamsError(f"{PARAMS_PATH}.reference_invariant_to: {field!r} is not a harness "
                              "field")
    return [field for field in config.fields if field in config.reference_invariant_to]


def excludes_zero(interval: Bounds) -> bool:
    return interval.low > 0 or interval.high < 0


def reference_verdict(settings: Sequence[Setting], differences: Mapping[str, Bounds],
                      invariant_to: Sequence[str]) -> dict[str, Any]:
    """"stayed put" when the reference's paired difference from the pinned setting contains 0
    under every setting of a field it should ignore (`checked`); "moved" otherwise, naming the
    settings it moved under (`drifted`)."""
    checked = [s.name for s in settings if s.field is not None and s.field in invariant_to]
    drifted = [name for name in checked if excludes_zero(differences[name])]
    return {"verdict": MOVED if drifted else STAYED_PUT, "invariant_to": list(invariant_to),
            "checked": checked, "drifted": drifted}


def largest_move(differences: Mapping[str, Bounds]) -> str | None:
    """The setting whose paired difference from the pinned one is largest in size (ties: the
    first); None when only the pinned setting ran."""
    if not differences:
        return None
    return max(differences, key=lambda name: abs(differences[name].estimate))
