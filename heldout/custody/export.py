"""The ledger's export in git, `ledger/test_access.jsonl`: the store's lines, for a witness.

The store (heldout.custody.store) is the ledger; the export is what git holds of it, rewritten
from the store after every append. Two things keep it honest:

- **Merges never conflict.** `.gitattributes` names the `heldout-ledger` merge driver for the
  export (`heldout ledger setup`, run by `make`, registers it in the clone's git config). It
  keeps every line of both sides and of their base, each once, in chain order: two branches
  whose lines came from one store merge into that store's chain. Lines from two stores (two
  clones on two embedded stores) are kept too, ours first: the fork is the audit's to name.
- **The witness checks the store.** `heldout audit` reads the store's lines, and requires the
  export to be a prefix of them, line for line and byte for byte (a line edited, forged or
  written elsewhere is a problem; lines the export does not show yet are a note), and every
  committed version of the export to be in the store too (a committed line the store does not
  hold, or holds otherwise, is a problem: the store lost or changed it, or it came from another).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from heldout.custody.anchor import committed_versions
from heldout.custody.keys import KeyRing
from heldout.custody.ledger import ChainBreak, LedgerStore, verify_text
from heldout.custody.store import EXPORT, StoreError, ledger_text
from heldout.errors import HeldoutError

DRIVER = "heldout-ledger"
ATTRIBUTE = f"{EXPORT.as_posix()} merge={DRIVER}"
EXPORT_COMMAND = "heldout ledger export"


# --- the merge driver ----------------------------------------------------------------------


def merge_exports(base: str, ours: str, theirs: str) -> str:
    """Every line of the three versions, each once. When no two distinct lines claim one `seq`
    (they came from one store), in seq order: the chain. Otherwise ours, then base's and
    theirs' lines ours lacks, in their order."""
    seen: dict[str, None] = {}
    for text in (ours, base, theirs):
        for line in text.splitlines():
            if line.strip():
                seen.setdefault(line, None)
    lines = list(seen)
    seqs = [_seq(line) for line in lines]
    if None not in seqs and len(set(seqs)) == len(seqs):
        lines = [line for _, line in sorted(zip(seqs, lines, strict=True))]
    return "".join(line + "\n" for line in lines)


def _seq(line: str) -> int | None:
    try:
        seq = json.loads(line).get("seq")
    except (ValueError, AttributeError, RecursionError):  # not a ledger line: kept, unordered
        return None
    return seq if isinstance(seq, int) else None


def merge_files(base: Path, ours: Path, theirs: Path) -> int:
    """git's merge driver call (`%O %A %B`): the merge is written to `ours`; 0, no conflict.
    git gives three files (an empty one for a side that has none); a path that is not a file
    is a mistyped command line, refused before anything is written."""
    for path in (base, ours, theirs):
        if not path.is_file():
            raise HeldoutError(f"{path}: no such file; git's merge driver is given three files "
                               "(%O %A %B), the base, ours and theirs")
    read = [ledger_text(path) for path in (base, ours, theirs)]
    ours.write_text(merge_exports(*read), encoding="utf-8", errors="surrogateescape")
    return 0


def driver_command() -> str:
    """The command git runs to merge the export: this installation's `heldout`."""
    found = Path(sys.executable).with_name("heldout")
    program = str(found) if found.is_file() else shutil.which("heldout") or "heldout"
    return f"{shlex.quote(program)} ledger merge %O %A %B"


def register_merge_driver(root: Path) -> str:
    """Name the driver for the export in `.gitattributes` and register it in the clone's git
    config (git keeps a driver's command out of the repository: each clone registers its own).
    Never raises; returns what happened."""
    attributes = root / ".gitattributes"
    present = attributes.read_text(encoding="utf-8") if attributes.is_file() else ""
    if ATTRIBUTE not in present.splitlines():
        attributes.write_text(present + ("" if present.endswith("\n") or not present else "\n")
                              + ATTRIBUTE + "\n", encoding="utf-8")
    settings = (("name", "heldout: both sides' ledger lines, in chain order"),
                ("driver", driver_command()))
    for name, value in settings:
        try:
            done = subprocess.run(["git", "config", f"merge.{DRIVER}.{name}", value], cwd=root,
                                  capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as error:
            return f"merge driver not registered: git could not be run ({error})"
        if done.returncode != 0:
            return f"merge driver not registered: {done.stderr.strip() or 'not a git clone'}"
    return f"git merges {EXPORT.as_posix()} with {DRIVER}: {driver_command()}"


# --- the export as a witness of the store --------------------------------------------------


@dataclass
class Witness:
    """The store's lines as the audit reads them, and what the export and git say of them."""

    text: str | None  # the store's lines as JSONL; the export's text while the store is empty
    where: str = ""
    export_break: ChainBreak | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add_to(self, result: Any) -> None:
        """Into an AuditResult (heldout.custody.audit): a break the export shows where the
        store shows none, the problems and the notes."""
        if result.chain_break is None and self.export_break is not None:
            result.chain_break = self.export_break
        result.problems.extend(self.problems)
        result.notes.extend(self.notes)
        if self.where:
            result.scope = f"{result.scope}; the ledger store {self.where}".lstrip("; ")


def witness(root: Path, ring: KeyRing | None) -> Witness:
    """The store of the project at `root`, checked against its export and git's versions."""
    export = root / EXPORT
    exported = ledger_text(export) if export.is_file() else None
    try:
        store = LedgerStore.open(root)
    except StoreError as error:
        return Witness(exported, problems=[f"the ledger store cannot be read: {error}"])
    texts = store.texts()
    seen = Witness("".join(t + "\n" for t in texts) if texts else exported, store.where)
    if store.store.adoption:
        seen.problems.append(store.store.adoption)
    shown = [line for line in (exported or "").splitlines() if line]
    if texts:  # else the audit reads the export itself
        _check_export(seen, shown, texts, store.where, ring)
    versions, _ = committed_versions(root)
    for version in versions:
        for number, line in enumerate(version.text.splitlines(), start=1):
            # Where the export differs from the commit, the git anchor already says so.
            exported_too = number <= len(shown) and shown[number - 1] == line
            if exported_too and (number > len(texts) or texts[number - 1] != line):
                how = "does not hold it" if number > len(texts) else "holds another line there"
                seen.problems.append(
                    f"ledger line {number} was committed in {version.commit[:7]}, and the "
                    f"ledger store {store.where} {how}: the store lost or changed it, or the "
                    "line was written to another store (a fork)")
                break
    return seen


def _check_export(seen: Witness, shown: list[str], texts: list[str], where: str,
                  ring: KeyRing | None) -> None:
    for number, line in enumerate(shown, start=1):
        if number > len(texts) or texts[number - 1] != line:
            seen.problems.append(
                f"{EXPORT.as_posix()} line {number} is not line {number} of the ledger store "
                f"{where}: the file was edited, or holds lines written to another store; the "
                f"store's lines are the ledger ({EXPORT_COMMAND} --force rewrites the file "
                "from them)")
            seen.export_break = verify_text("".join(t + "\n" for t in shown), ring)
            return
    if len(texts) > len(shown):
        first, last = len(shown) + 1, len(texts)
        span = str(first) if first == last else f"{first}-{last}"
        seen.notes.append(f"ledger lines {span} are in the ledger store {where} and not yet in "
                          f"{EXPORT.as_posix()}: {EXPORT_COMMAND} (each append rewrites it)")
