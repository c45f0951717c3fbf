"""All of params.yaml, checked before any stage runs: every problem at once, each line naming
the file and the dotted field (`params.yaml: checkpoints.run/step_90: ...`).

Two tiers, so that a no-op `heldout pipeline` stays fast:

- `read_params` and `name_problems` need only the YAML: the file parses to a mapping of
  sections, and the checkpoints are a mapping of safe names. DVC expands `rollouts@<name>` and
  reads `checkpoints.<name>` from these names, so they are checked before DVC is asked anything
  (and when they are wrong, the whole file is, so that one problem hides no other).
- `check_params` validates every section with the model its stage validates it with, each
  checkpoint's settings with its agent kind's model (the settings only: no agent is made, so no
  HTTP client and no process), and every name that refers to a checkpoint (base,
  sensitivity.checkpoints, select.final). Importing the models costs a second or two (pandas,
  scipy), which is why the cheap tier exists.

The models of sections defined where this module may not import from (the test stage's, the
flows') come from the caller: flows/params.py `params_sections` holds the whole list.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from heldout.errors import HeldoutError, ParamsError, not_a_field

# stages.catalog.PARAMS_FILE (not imported: the catalog imports the custody guard, and the cheap
# tier runs before anything heavy; tests/pipeline/test_terminal.py holds the two together).
PARAMS_FILE = "params.yaml"
# A checkpoint's name is a DVC foreach key (`rollouts@<name>`), a params path
# (`checkpoints.<name>`, so no dots), a file name (data/rollouts/val/<name>.parquet) and an MLflow
# tag: letters, digits, `_` and `-`, starting with a letter.
CHECKPOINT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
# The sections that are not a model of their own: checked by check_params itself.
NAMED = ("checkpoints", "base")
Section = TypeVar("Section", bound=BaseModel)
# stages.sensitivity.REFERENCE: the sweep's reference row, which no checkpoint may be swept as
# (not imported: a stage imports stages.common, which imports this module).
REFERENCE = "reference"


def read_params(root: Path) -> dict[str, Any]:
    """params.yaml as a mapping of sections, or a ParamsError saying why not."""
    path = root / PARAMS_FILE
    try:
        params = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ParamsError(f"{path}: no such file; a project keeps its params there") from None
    except yaml.YAMLError as error:
        raise ParamsError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(params, dict):
        raise ParamsError(f"{path}: expected a mapping of sections at the top level")
    return params


def section(params: Mapping[str, Any], name: str, model: type[Section]) -> Section:
    """One section of params.yaml, validated; errors name the dotted path of the bad field."""
    try:
        return model.model_validate(params.get(name) or {})
    except ValidationError as error:
        raise ParamsError("\n".join(validation_lines(name, error, model))) from None


def validation_lines(name: str, error: ValidationError,
                     model: type[BaseModel] | None = None) -> list[str]:
    """One line per problem pydantic found in section `name`, each naming its dotted field; a
    field the section does not have is named as such, with the closest one it has."""
    lines = []
    for detail in error.errors():
        message = detail["msg"]
        if detail["type"] == "extra_forbidden":
            message = unknown_field(model, detail["loc"])
        lines.append(f"{PARAMS_FILE}: {'.'.join([name, *map(str, detail['loc'])])}: {message}")
    return lines


def unknown_field(model: type[BaseModel] | None, loc: tuple) -> str:
    """heldout's words for pydantic's "Extra inputs are not permitted"."""
    for key in loc[:-1]:  # down to the model that holds the field
        field = model.model_fields.get(str(key)) if model is not None else None
        annotation = field.annotation if field is not None else None
        model = annotation if isinstance(annotation, type) and issubclass(
            annotation, BaseModel) else None
    if model is None:
        return "not a field heldout reads"
    return not_a_field(str(loc[-1]), list(model.model_fields))


def name_problems(params: Mapping[str, Any]) -> list[str]:
    checkpoints = params.get("checkpoints")
    where = f"{PARAMS_FILE}: checkpoints"
    if not isinstance(checkpoints, dict) or not checkpoints:
        return [f"{where}: expected a mapping of checkpoint names to settings, e.g. "
                "{base: {agent: demo}}"]
    problems = []
    for name, settings in checkpoints.items():
        if not isinstance(name, str) or not CHECKPOINT_NAME.fullmatch(name):
            problems.append(f"{where}.{name}: not a usable checkpoint name: letters, digits, "
                            "'_' and '-', starting with a letter, at most 64 (it names a DVC "
                            "stage, a params path and a file)")
        elif not isinstance(settings, dict) or "agent" not in settings:
            problems.append(f"{where}.{name}: expected a mapping with 'agent', e.g. "
                            "{agent: demo, skill: 0.5}")
    return problems


def check_params(params: Mapping[str, Any], sections: Mapping[str, type[BaseModel]],
                 root: Path | None = None) -> None:
    """Every section of params.yaml, as the stages will read it (`sections`: each section's
    model, `stage_sections()` and those of the modules this one may not import), and with the
    project's `root`, the harness against the kinds of the tasks it will score. Raises one
    ParamsError that lists every problem, one line each."""
    problems = name_problems(params)
    known = [*sections, *NAMED]
    for key in params:
        if key not in known:
            problems.append(f"{PARAMS_FILE}: {key}: {not_a_field(str(key), known, 'section')}")
    valid: dict[str, BaseModel] = {}
    for name, model in sections.items():
        try:
            valid[name] = model.model_validate(params.get(name) or {})
        except ValidationError as error:
            problems += validation_lines(name, error, model)
    checkpoints = params.get("checkpoints")
    names = list(checkpoints) if isinstance(checkpoints, dict) else []
    for name in names:
        problems += agent_problems(f"checkpoints.{name}", checkpoints[name])
    problems += reference_problems(params, valid, names)
    if root is not None:
        problems += scorer_problems(root, valid) + judge_problems(root, valid)
    raise_problems(problems)


def judge_problems(root: Path, valid: Mapping[str, BaseModel]) -> list[str]:
    """The judge/ folder the report stage depends on (DVC stops on a missing one with a bare
    file-not-found), and the TRUST.json params.judge names."""
    from heldout.statistics.judge_trust import JUDGE_DIR

    if not (root / JUDGE_DIR).is_dir():
        return [f"{PARAMS_FILE}: judge: the folder {JUDGE_DIR}/ is missing, and the report stage "
                f"depends on it (params.judge.trust lives there): restore it (`git checkout "
                f"{JUDGE_DIR}/`) or create it empty"]
    judge = valid.get("judge")
    trust = getattr(judge, "trust", "")
    if trust and not (root / trust).is_file():
        return [f"{PARAMS_FILE}: judge.trust: {trust} does not exist: write it with `heldout "
                "judge-trust LABELS.jsonl --judged data/rollouts/val/<checkpoint>.parquet --out "
                f"{trust}`, or set judge.trust to ''"]
    return []


def scorer_problems(root: Path, valid: Mapping[str, BaseModel]) -> list[str]:
    """The harness's scorer_version against the kinds of the tasks (found by the rollouts
    stage otherwise, after the split and decontaminate stages ran). A sealed source is read by
    its stage alone."""
    from heldout.custody.guard import SEALED_SUFFIX
    from heldout.episodes.rollout import check_scorer_version
    from heldout.tasks.sources import source_kinds

    tasks, harness = valid.get("tasks"), valid.get("harness")
    if tasks is None or harness is None or tasks.source.endswith(SEALED_SUFFIX):
        return []
    kinds = source_kinds(tasks.source if tasks.source == "humaneval" else root / tasks.source)
    return _raised(lambda: check_scorer_version(kinds or (), harness))


def stage_sections() -> dict[str, type[BaseModel]]:
    """The models of the sections that the core and the stages' shell define (imported here,
    lazily: they pull in pandas and scipy). The test stage's own (test, reruns), the traces'
    (tracing: stages.test must never reach the module that writes traces) and the flows'
    (orchestration) come from the caller: this module may import none of them."""
    from heldout.contamination.config import DecontaminateConfig
    from heldout.custody.keys import CustodyConfig
    from heldout.episodes.harness import Harness
    from heldout.episodes.rollout import RolloutsConfig
    from heldout.episodes.sweep import SensitivityConfig
    from heldout.statistics.counts import ScoreConfig
    from heldout.statistics.judge_trust import JudgeConfig
    from heldout.statistics.public_hidden import AlarmConfig
    from heldout.statistics.recipe import RecipesConfig
    from heldout.statistics.selection import SelectConfig
    from heldout.tasks.sources import TasksConfig
    from heldout.tasks.split import SplitConfig
    from stages.tracking import TrackingConfig

    return {"tasks": TasksConfig, "split": SplitConfig, "mlflow": TrackingConfig,
            "decontaminate": DecontaminateConfig, "harness": Harness, "alarm": AlarmConfig,
            "rollouts": RolloutsConfig, "select": SelectConfig, "custody": CustodyConfig,
            "sensitivity": SensitivityConfig, "score": ScoreConfig, "recipes": RecipesConfig,
            "judge": JudgeConfig}


def agent_problems(path: str, settings: Any) -> list[str]:
    """An agent's settings against its kind's settings model; the agent itself is not made."""
    from heldout.agents.registry import AGENT_KINDS, data_cutoff_problem, kind_settings
    from heldout.plugins import InvalidSettings

    if not isinstance(settings, dict):
        return []  # name_problems said so
    kind = settings.get("agent")
    if kind not in AGENT_KINDS:
        return [f"{PARAMS_FILE}: {path}.agent: {kind!r} is not an agent kind; choose one of "
                f"{', '.join(AGENT_KINDS)}"]
    cutoff = data_cutoff_problem(settings)
    if cutoff:
        return [f"{PARAMS_FILE}: {path}.data_cutoff: {cutoff}"]
    try:
        AGENT_KINDS[kind].validate(kind_settings(settings))
    except InvalidSettings as error:
        return error.render(f"{PARAMS_FILE}: {path}.").splitlines()
    return key_leak_problems(path, settings)


def key_leak_problems(path: str, settings: Mapping[str, Any]) -> list[str]:
    """An agent's settings that would hand it the test key under another name: a value that is
    the key (pasted, or the content of the variable api_key_env names). The secret is never
    repeated in the message."""
    from heldout.custody.keys import TestKeyError, load_keys

    try:
        secrets = {key.secret.hex() for key in load_keys().keys}
    except TestKeyError:
        return []  # no key here: none can leak
    named = settings.get("api_key_env")
    values = [("api_key_env", os.environ.get(named, ""))] if isinstance(named, str) else []
    values += [(field, value) for field, value in _strings(settings)]
    return [f"{PARAMS_FILE}: {path}.{field}: holds the test key, which never leaves heldout; "
            "give this agent a key of its own" for field, value in values
            if value.strip().lower() in secrets]


def _strings(value: Any, where: str = "") -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, Mapping):
        return [found for key, item in value.items()
                for found in _strings(item, f"{where}.{key}" if where else str(key))]
    if isinstance(value, list | tuple):
        return [found for number, item in enumerate(value)
                for found in _strings(item, f"{where}[{number}]")]
    return []


def reference_problems(params: Mapping[str, Any], valid: Mapping[str, BaseModel],
                       names: list[str]) -> list[str]:
    """The names that must be checkpoints, the split's fractions, the sweep's plan and the
    val pass@k's largest k against harness.n."""
    from heldout.episodes.sweep import invariant_fields, plan_settings
    from heldout.tasks.split import check_fractions

    known = f"the checkpoints are {', '.join(names) or 'none'}"
    problems = []
    base = params.get("base")
    if names and base not in names:
        problems.append(f"{PARAMS_FILE}: base: {base!r} is not a checkpoint; {known}")
    select = valid.get("select")
    if names and select is not None and select.rule == "last" and select.final not in names:
        problems.append(f"{PARAMS_FILE}: select.final: {select.final!r} is not a checkpoint "
                        f"(rule 'last' needs one); {known}")
    recipes = valid.get("recipes")
    for name in recipes.checkpoints() if names and recipes is not None else []:
        if name not in names:
            problems.append(f"{PARAMS_FILE}: recipes: {name!r} is not a checkpoint; {known}")
    split = valid.get("split")
    if split is not None:
        problems += _raised(lambda: check_fractions(split.fractions))
    sweep, harness, score = valid.get("sensitivity"), valid.get("harness"), valid.get("score")
    if score is not None and harness is not None:
        problems += _raised(lambda: score.ks(harness.n))
    if sweep is not None:
        for name in sweep.checkpoints:
            if names and (name not in names or name == REFERENCE):
                why = ("names the reference's row" if name == REFERENCE else
                       f"is not a checkpoint; {known}")
                problems.append(f"{PARAMS_FILE}: sensitivity.checkpoints: {name!r} {why}")
        problems += agent_problems("sensitivity.reference", dict(sweep.reference))
        problems += _raised(lambda: invariant_fields(sweep))
        if harness is not None:
            problems += _raised(lambda: plan_settings(harness, sweep.fields, sweep.n))
    return problems


def _raised(check: Callable[[], object]) -> list[str]:
    """The message of the HeldoutError `check` raises, as lines naming params.yaml."""
    try:
        check()
    except HeldoutError as error:
        text = str(error)
        return [text if text.startswith(PARAMS_FILE) else f"{PARAMS_FILE}: {text}"]
    return []


def raise_problems(problems: list[str]) -> None:
    if problems:
        raise ParamsError("\n".join(dict.fromkeys(problems)))
