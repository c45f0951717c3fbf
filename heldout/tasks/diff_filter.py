"""What of a completion's diff the judge applies: changes to the verdict's machinery are dropped,
each with its reason, before the hidden tests are put in.

The repository's own code runs inside the test process, so every file the test run reads
besides the code under test is a way to the verdict: the tests themselves, pytest's
configuration and plugins, the interpreter's start-up hooks, a new module the interpreter or
pytest could import in place of one it looks for (whatever its name: `_distutils_hack`, `org`),
bytecode that would be run instead of its source. A change to any of them decides
nothing: it is dropped and reported (`Dropped`), the rest applies. Paths that leave the tree,
symlinks and binary patches are dropped too.
"""

from __future__ import annotations

import configparser
import tomllib
from dataclasses import dataclass
from pathlib import PurePosixPath

from heldout.tasks.patches import FilePatch, PatchError, apply_patch

# Programs a test command may run: never resolved from the tree (the judge runs pytest by its
# absolute path), and refused as files so that no later change of command can pick one up.
EXECUTABLES = frozenset({"python", "python3", "pytest", "py.test", "git", "sh", "bash", "env"})
PYTEST_CONFIGS = frozenset({"pytest.ini", ".pytest.ini"})
# Sections of shared configuration files that pytest or the packaging machinery reads.
TEST_SECTIONS = {"tox.ini": ("pytest", "tool:pytest"),
                 "setup.cfg": ("tool:pytest", "options.entry_points")}
START_UP_HOOKS = frozenset({"sitecustomize.py", "usercustomize.py"})
# Folders of tests: their helpers and data are the tests' own, whatever their names.
TEST_FOLDERS = frozenset({"tests", "test", "testing"})


@dataclass(frozen=True)
class Dropped:
    path: str
    why: str


def is_test_file(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def unsafe_path(path: str) -> str | None:
    """Why a path from a diff cannot be written inside the tree, or None."""
    parts = PurePosixPath(path).parts
    if not path or path.startswith("/") or "\\" in path:
        return "a path outside the repository"
    if ".." in parts or "." in parts:
        return "a path outside the repository"
    if ".git" in parts:
        return "git's own files"
    return None


def filter_patch(patches: list[FilePatch], tree: dict[str, str], hidden: set[str]
                 ) -> tuple[list[FilePatch], list[Dropped]]:
    """(the file patches the judge applies, the ones it drops). `tree` is the repository at
    its base, `hidden` the paths the hidden tests add or replace and the files that hold the
    tests the verdict reads."""
    kept: list[FilePatch] = []
    dropped: list[Dropped] = []
    for patch in patches:
        why = next((reason for path in sorted(patch.paths)
                    if (reason := _why_dropped(patch, path, tree, hidden))), None)
        if why is None:
            kept.append(patch)
        else:
            dropped.append(Dropped(patch.path, why))
    return kept, dropped


def _why_dropped(patch: FilePatch, path: str, tree: dict[str, str], hidden: set[str]
                 ) -> str | None:
    unsafe = unsafe_path(path)
    if unsafe:
        return unsafe
    pure = PurePosixPath(path)
    name = pure.name
    test_folder = next((part for part in pure.parts[:-1] if part in TEST_FOLDERS), None)
    checks = (
        (patch.binary, "a binary file"),
        (patch.symlink, "a symlink"),
        (path in hidden, "a file of the hidden tests"),
        (is_test_file(path), "a test file"),
        (test_folder is not None, f"test infrastructure (a file under {test_folder}/)"),
        (name == "conftest.py", "test infrastructure (conftest.py)"),
        (name in PYTEST_CONFIGS, f"pytest's configuration ({name})"),
        (name in START_UP_HOOKS, f"an interpreter start-up hook ({name})"),
        (name.endswith(".pth"), "an interpreter start-up hook (a .pth file)"),
        (any(part.endswith((".dist-info", ".egg-info")) for part in pure.parts),
         "installed-package metadata (entry-point plugins)"),
        ("__pycache__" in pure.parts or name.endswith((".pyc", ".pyo")),
         "compiled bytecode, which would run instead of its source"),
        (name in EXECUTABLES, f"a program the test command could run ({name})"),
    )
    reason = next((why for hit, why in checks if hit), None)
    if reason:
        return reason
    if path not in tree and name.endswith(".py") and not _in_a_package(pure, tree):
        return (f"a new module outside the repository's packages ({pure.parts[0]}): the "
                "test run could import it in place of a module it looks for")
    if name in TEST_SECTIONS or name == "pyproject.toml":
        return _configuration_change(patch, path, tree)
    return None


def _in_a_package(path: PurePosixPath, tree: dict[str, str]) -> bool:
    """Whether a folder above `path` is a package of the repository at its base (it has an
    `__init__.py` there): only then is the new module importable by its package's name alone,
    never as a top-level module of its own."""
    return any(str(PurePosixPath(*path.parts[:depth]) / "__init__.py") in tree
               for depth in range(1, len(path.parts)))


def _configuration_change(patch: FilePatch, path: str, tree: dict[str, str]) -> str | None:
    """Why a change to tox.ini, setup.cfg or pyproject.toml is dropped: it changes a section
    pytest or the plugin machinery reads (or leaves the file unreadable)."""
    before = tree.get(patch.old_path, "")
    try:
        after = "" if patch.deleted else apply_patch({path: before}, [
            FilePatch(path=path, old_path=path, hunks=patch.hunks, created=False)])[path]
    except PatchError:
        return None  # it does not apply: the whole diff fails there, as it would anyway
    try:
        old, new = _test_sections(path, before), _test_sections(path, after)
    except (configparser.Error, tomllib.TOMLDecodeError, ValueError):
        return f"test configuration ({PurePosixPath(path).name} no longer parses)"
    changed = sorted(name for name in set(old) | set(new) if old.get(name) != new.get(name))
    if changed:
        return f"test configuration ([{changed[0]}] in {PurePosixPath(path).name})"
    return None


def _test_sections(path: str, text: str) -> dict[str, object]:
    name = PurePosixPath(path).name
    if name == "pyproject.toml":
        data = tomllib.loads(text)
        tool = data.get("tool", {})
        project = data.get("project", {})
        return {"tool.pytest": tool.get("pytest"),
                "project.entry-points": project.get("entry-points"),
                "tool.setuptools": tool.get("setuptools"),
                "tool.poetry.plugins": tool.get("poetry", {}).get("plugins")}
    parser = configparser.RawConfigParser()
    parser.read_string(text)
    return {section: dict(parser[section]) for section in TEST_SECTIONS[name]
            if parser.has_section(section)}
