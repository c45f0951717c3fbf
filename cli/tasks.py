"""`heldout tasks seal`: a private task file sealed for the team's test key, so that the test
split cannot be rebuilt from the source without the key (heldout.custody.task_source); and the
sandbox half of `heldout tasks validate` for repository tasks."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from heldout.errors import HeldoutError

if TYPE_CHECKING:
    from heldout.tasks.record import Task

stdout = Console()
_SAY = {"highlight": False, "soft_wrap": True, "markup": False}


def seal(
    source: Annotated[Path, typer.Argument(help="A JSONL task file (one task a line).")],
    out: Annotated[Path, typer.Option(help="The sealed task file to write, ending in .sealed; "
                                           "then set tasks.source to it.")],
    public_key: Annotated[str, typer.Option(
        help="Seal for this public key (64 hex digits); refused unless it is the team key, "
             "where one is named. Default: the key split seals the test split for.")] = "",
) -> None:
    """Seal a task file for the test key, as the test split is: only `split` (and `test`, inside
    its lock) can then load it, and only with the key."""
    from heldout.custody.task_source import SEALED_SUFFIX, seal_tasks
    from heldout.errors import InputFileError
    from heldout.tasks.record import tasks_digest

    if out.suffix != SEALED_SUFFIX:
        raise HeldoutError(f"--out {out}: a sealed task source's name ends in {SEALED_SUFFIX} "
                           "(that is how the guard knows it without reading it)")
    if out.resolve() == source.resolve():
        raise HeldoutError(f"--out {out} is the source itself: write the sealed file elsewhere")
    public, said = _sealing_key(public_key.strip().lower())
    try:
        sealed, tasks = seal_tasks(source, public)
    except InputFileError as error:
        first, more = error.problems[0].render(source), len(error.problems) - 1
        raise HeldoutError(first + (f" (and {more} more problems: `heldout tasks validate "
                                    f"{source}` lists them)" if more else "")) from None
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = out.with_name(f".{out.name}.incoming")
    staged.write_bytes(sealed)
    staged.replace(out)
    from heldout.custody.keys import key_id

    groups = len({task.group for task in tasks})
    stdout.print(f"sealed {len(tasks)} tasks in {groups} groups from {source} for test key "
                 f"{key_id(public)} ({said}) into {out} (digest {tasks_digest(tasks)[:12]})",
                 **_SAY)
    stdout.print(f"set tasks.source: {out} in params.yaml, and keep {source} out of the "
                 "repository and its DVC cache", **_SAY)


def _sealing_key(given: str) -> tuple[bytes, str]:
    """The public key to seal for, and whose it is: `given`, if it is every named team key;
    else the key `split` seals the test split for (heldout.custody.keys.team_sealing_key)."""
    from heldout.custody.keys import CustodyConfig, TeamKeyError, key_id, team_sealing_key
    from heldout.custody.store import open_line_store
    from heldout.environment import find_project_root
    from stages.params_check import read_params, section

    root = find_project_root()
    custody = section(read_params(root), "custody", CustodyConfig)
    store = open_line_store(root, custody.ledger_url)
    if not given:
        public, note = team_sealing_key(store, custody)
        return public, note or "the key split seals for"
    public = bytes.fromhex(CustodyConfig(public_key=given).public_key) if _hex(given) else None
    if public is None:
        raise HeldoutError(f"--public-key {given!r}: 64 hex digits (`heldout key` prints them)")
    named = [(team, f"the ledger store {store.where}") for team in store.team_keys()[-1:]]
    named += [(custody.public_key, "params.custody.public_key")] if custody.public_key else []
    for team, where in named:
        if team != given:
            raise TeamKeyError(f"refused: test key {key_id(public)} is not the team key "
                               f"{key_id(bytes.fromhex(team))} named in {where}: a task source "
                               "is sealed only for the team key (`heldout key --team` prints it)")
    return public, "the team key" if named else "the key given"


def _hex(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def check_repositories(tasks: list[Task], backend: str) -> None:
    """Judge each repository task at its base and with its reference; raise HeldoutError
    listing every unsound one (heldout.tasks.repository_checks)."""
    repositories = [task for task in tasks if task.kind == "repository"]
    if not repositories:
        return
    from heldout.episodes.harness import Harness
    from heldout.sandbox.config import make_sandbox
    from heldout.tasks.repository_checks import check_repository_tasks

    harness = Harness()
    stdout.print(f"judging {len(repositories)} repository tasks at their base and with their "
                 f"reference ({backend} sandbox)...", **_SAY)
    with make_sandbox(backend) as sandbox:
        found = check_repository_tasks(repositories, sandbox, harness.timeout_s * 3,
                                       harness.sandbox.memory_mb)
    if found:
        lines = [f"{task_id}: {problem}" for task_id, problems in found.items()
                 for problem in problems]
        raise HeldoutError(f"{len(found)} of {len(repositories)} repository tasks are not "
                           "sound:\n  " + "\n  ".join(lines))


def import_swebench(
    instances: Annotated[Path, typer.Argument(help="SWE-bench instances, JSON Lines.",
                                              exists=True, dir_okay=False)],
    repos: Annotated[Path, typer.Option(help="Where each repository's git clone is, as "
                                             "DIR/<owner>__<name>.")],
    out: Annotated[Path, typer.Option(help="The task file to write (JSON Lines).")],
    test_command: Annotated[str, typer.Option(help="The pytest command of every task.")] =
        "pytest",
) -> None:
    """Make repository tasks from SWE-bench instances (heldout.tasks.swebench): each task's
    tree is its clone at its base commit, nothing of the history. Every instance that cannot
    be imported (a patch or test_patch over 1 MiB among them) is listed on a line with its
    reason; the others are written."""
    from heldout.json_lines import LineError, read_line
    from heldout.tasks.sources import load_tasks
    from heldout.tasks.swebench import task_record

    records, skipped = [], []
    for number, raw in enumerate(instances.read_bytes().splitlines(), start=1):
        if not raw.strip():
            continue
        instance = None
        try:
            instance = read_line(raw)
            if not isinstance(instance, dict):
                raise ValueError("not a JSON object")
            records.append(task_record(instance, repos, out.resolve().parent, test_command))
        except (LineError, ValueError) as error:
            name = instance.get("instance_id") if isinstance(instance, dict) else None
            named = f" ({name})" if isinstance(name, str) else ""
            skipped.append(f"{instances}:{number}{named}: {error}")
    if not records:
        raise HeldoutError("no instance could be imported:" + (
            f" {skipped[0]}" if len(skipped) == 1 else "\n  " + "\n  ".join(skipped[:20])))
    from heldout.canonical import canonical_json

    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(canonical_json(record) + "\n" for record in records),
                   encoding="utf-8")
    tasks = load_tasks(out)  # every tree read and every patch checked against it
    for line in skipped:
        stdout.print(f"skipped {line}", **_SAY)
    stdout.print(f"wrote {len(tasks)} repository tasks from {len(records) + len(skipped)} "
                 f"instances to {out}; `heldout tasks validate {out}` judges each at its base "
                 "and with its reference", **_SAY)
