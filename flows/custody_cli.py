"""`heldout key` and `heldout ledger …`: the test key, the team key, the ledger store and its export
in git (heldout.custody.export)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

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
