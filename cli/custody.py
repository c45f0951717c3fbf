"""`heldout key`, `heldout audit` and `heldout ledger …`: the test key, the team key, the
ledger's audit against MLflow, the ledger store and its export in git
(heldout.custody.export)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from heldout.errors import HeldoutError

_stderr = Console(stderr=True)
ledger_app = typer.Typer(help="The test-access ledger's store and its export in git.",
                         no_args_is_help=True)
stdout = Console()
_SAY = {"highlight": False, "soft_wrap": True, "markup": False}


@ledger_app.command("merge")
def merge(base: Path, ours: Path, theirs: Path) -> None:
    """git's merge driver for ledger/test_access.jsonl (`%O %A %B`): writes every line of both
    sides and their base, each once, in chain order, to OURS. Never a conflict."""
    from heldout.custody.export import merge_files

    sys.exit(merge_files(base, ours, theirs))


@ledger_app.command("setup")
def setup(quiet: Annotated[bool, typer.Option(help="Say nothing when all is well.")] = False,
          ) -> None:
    """Register the merge driver of the ledger's export in this clone (`make` runs it)."""
    from heldout.custody.export import register_merge_driver
    from heldout.environment import find_project_root

    said = register_merge_driver(find_project_root())
    if not quiet or said.startswith("merge driver not registered"):
        stdout.print(f"heldout: {said}", **_SAY)


@ledger_app.command("export")
def export(force: Annotated[bool, typer.Option(
        help="Rewrite the file even where it holds lines the store does not.")] = False,
           ) -> None:
    """Rewrite ledger/test_access.jsonl from the ledger store (each append does it too)."""
    from heldout.custody.ledger import LedgerStore
    from heldout.environment import find_project_root

    stdout.print(LedgerStore.open(find_project_root()).store.write_export(force=force), **_SAY)


def key(team: Annotated[bool, typer.Option(
        help="Name this key the team key in the ledger store and print the params line to "
             "commit: from then on split seals for no other key and test opens with no other."
        )] = False) -> None:
    """Show the test key this shell holds: its id and public half (for params.custody.public_key:
    whoever re-deals the split can then seal it without being able to read it). Never the secret."""
    from heldout.custody.keys import load_keys

    if team:
        return team_key()
    ring = load_keys()
    for number, held in enumerate(ring.keys):
        role = "current" if number == 0 else "older (verifies ledger lines only)"
        stdout.print(f"test key {held.key_id} ({role}, from {ring.source}): public key "
                     f"{held.public.hex()}", **_SAY)


def team_key() -> None:
    """`heldout key --team`: name this shell's key the team key in the ledger store, and print
    the params line to commit."""
    from heldout.custody.keys import name_team_key
    from heldout.custody.ledger import LedgerStore
    from heldout.environment import find_project_root

    key, said = name_team_key(LedgerStore.open(find_project_root()))
    stdout.print(said, **_SAY)
    stdout.print("commit this in params.yaml (then `dvc repro split` seals for it):", **_SAY)
    stdout.print(f"custody:\n  public_key: {key.public.hex()}", **_SAY)


def audit(
    resolve: Annotated[str | None, typer.Option(
        help="An orphan MLflow run (it touched the test split and no ledger line names it) "
             "to record as resolved, with --reason.")] = None,
    reason: Annotated[str, typer.Option(help="Why the orphan run is resolved (recorded).")] = "",
) -> None:
    """Check the test-access ledger (chain, MACs under the test key, the git anchor) and
    cross-check it against MLflow, every experiment and deleted runs included; list every
    access. Exits 1 on any problem."""
    from rich.table import Table

    from heldout.custody.audit import audit_project
    from heldout.environment import apply_defaults, find_project_root
    from stages.catalog import LEDGER
    from stages.tracking import runs_touching_test_split

    if reason and resolve is None:
        raise typer.BadParameter("--reason is recorded with --resolve RUN_ID (the orphan run "
                                 "it resolves); alone it would be ignored")
    root = find_project_root()
    apply_defaults(root)
    runs = runs_touching_test_split(root)
    if resolve is not None:
        _resolve_orphan(root, runs, resolve, reason)
    result = audit_project(root, runs)
    table = Table(title=f"test-set accesses ({LEDGER})")
    for column in ("seq", "time", "user", "outcome", "access_id", "test_version", "candidate",
                   "base", "harness", "reason"):
        table.add_column(column)
    for e in result.accesses:
        table.add_row(*(str(e.get(name) or "") for name in ("seq", "time", "user", "outcome",
                                                             "access_id", "test_version",
                                                             "candidate", "base")),
                      str(e.get("harness") or "")[:12], str(e.get("reason") or "")[:60])
    # Piped output keeps whole rows: the table is for reading, not for a terminal's width.
    Console(width=None if stdout.is_terminal else 200).print(table)
    for version, models in sorted(result.models_per_test_version.items()):
        stdout.print(f"{version}: {models} models evaluated on it", highlight=False)
    say = {"highlight": False, "soft_wrap": True, "markup": False}
    stdout.print(result.key_status, **say)
    stdout.print(result.scope, **say)
    if result.anchor is not None:
        stdout.print(result.anchor.summary(), **say)
    for note in result.notes:
        stdout.print(f"note: {note}", **say)
    if result.chain_break:
        _stderr.print(f"ledger broken at line {result.chain_break.line} of {LEDGER}: "
                     f"{result.chain_break.reason}", **say)
    for problem in result.problems:
        _stderr.print(f"problem: {problem}", **say)
    if not result.ok:
        raise typer.Exit(1)
    stdout.print(f"audit OK: {result.lines} ledger lines, chain and MACs whole, ledger and "
                 "MLflow agree", highlight=False)


def _resolve_orphan(root: Path, runs: list, run_id: str, reason: str) -> None:
    from heldout.custody.anchor import stage_ledger
    from heldout.custody.audit import resolve_run
    from heldout.custody.keys import load_keys
    from stages.catalog import LEDGER

    run = next((run for run in runs if run.run_id == run_id), None)
    if run is None:
        raise HeldoutError(f"MLflow run {run_id} did not touch the test split (no run of the "
                           "store is tagged so or holds it as an input): nothing to resolve")
    entry = resolve_run(root / LEDGER, run, reason, load_keys().current)
    say = {"highlight": False, "soft_wrap": True, "markup": False}
    stdout.print(f"resolved MLflow run {run_id}: ledger line {entry['seq']} of {LEDGER}, MAC'd "
                 f"under test key {entry['key_id']}; reason: {entry['reason']}", **say)
    stdout.print(stage_ledger(root), **say)
