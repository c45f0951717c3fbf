"""The `repository` task kind: an agent edits a repository to resolve an issue; hidden tests
judge its diff in a fresh sandbox that starts from the repository at its base.

A task is the repository's tree (`files`, read from `snapshot` when the task file is loaded:
a folder beside it, a tarball, or a git repository at `base_commit`), the issue (`prompt`),
the hidden test patch (`tests`, a unified diff), the reference patch (`reference`), the tests
that must go from failing to passing (`fail_to_pass`) and keep passing (`pass_to_pass`), and
the pytest command (`test_command`). The completion is a unified diff.

The judge (heldout/tasks/repository_judge.py) never sees the agent's sandbox: the host applies
the completion's diff to the base tree, filtered (heldout/tasks/diff_filter.py), then the
hidden tests from the task, adds the sentinels, and sends the tree to a fresh judged program.
"""

from __future__ import annotations

import ast
import json
import secrets
import shlex
import textwrap
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from heldout.sandbox.protocol import Program
from heldout.tasks import repository_judge as judge
from heldout.tasks.diff_filter import filter_patch, unsafe_path
from heldout.tasks.kinds import TaskKind
from heldout.tasks.patches import PatchError, apply_patch, parse_patch, written_lines
from heldout.tasks.perturbed_copies import check_file
from heldout.tasks.record import Task, TaskName
from heldout.tasks.snapshots import SnapshotError, read_snapshot

KIND_NAME = "repository"
SCORER_VERSION = "repository/2"
ENTRY_POINT = "repository"  # Task requires the field; this kind judges the whole tree
# The interpreter with pytest that runs the tests: Debian's, on the host (subprocess backend,
# where /usr is in the sandbox) and in the image (docker). `-S -s -P`: no site (no .pth file,
# sitecustomize or usercustomize), no user site, the working folder not on sys.path; the
# judge's start (repository_judge.START) puts the folders in their order.
TEST_PYTHON = "/usr/bin/python3"
PYTEST = [TEST_PYTHON, "-S", "-s", "-P", "-c", judge.START]
# Options of the judge's own, after the task's: no cache written into the tree, and every test
# run whatever the repository's addopts say (-x would stop at a check).
JUDGE_OPTIONS = ["-p", "no:cacheprovider", "--maxfail=0", "-q", "--tb=no", "-rN", "--no-header"]
REFUSED_OPTIONS = ("-p", "--pyargs", "-c", "--rootdir", "--confcutdir", "--noconftest")


def command_options(test_command: str) -> list[str]:
    """The pytest options of a `test_command` (`pytest ...` or `python -m pytest ...`).
    Raises ValueError for any other command, or an option that changes what the run loads."""
    words = shlex.split(test_command)
    if words[:1] == ["pytest"]:
        options = words[1:]
    elif words[:1] in (["python"], ["python3"]) and words[1:3] == ["-m", "pytest"]:
        options = words[3:]
    else:
        raise ValueError("the repository kind runs pytest: the command must be `pytest ...` or "
                         f"`python -m pytest ...`, got {test_command!r}")
    refused = [word for word in options if word.split("=")[0] in REFUSED_OPTIONS]
    if refused:
        raise ValueError(f"{refused[0]} would change what the judge's run loads: leave it out")
    return options


def node_file(node: str) -> str:
    return node.split("::", 1)[0]


def parsed_patch(text: str, what: str) -> list:
    try:
        return parse_patch(text)
    except PatchError as error:
        raise ValueError(f"{what} is not a unified diff: {error}") from None


class RepositoryTask(Task):
    """A `repository` task. `tests` is the hidden test patch, `reference` the reference patch,
    `public_tests` a JSON list of test node ids the agent may run."""

    kind: Literal["repository"] = KIND_NAME
    entry_point: str = ENTRY_POINT
    repo: TaskName
    files: dict[str, str]
    base_commit: str | None = None
    fail_to_pass: list[str] = Field(min_length=1)
    pass_to_pass: list[str] = []
    test_command: str = "pytest"

    @model_validator(mode="before")
    @classmethod
    def _read_snapshot(cls, data: Any, info: ValidationInfo) -> Any:
        # `snapshot` is where the tree is, relative to the task file: read into `files` at
        # load, so that the record (and its digest, its split, its seal) holds the tree itself.
        if not isinstance(data, dict) or "snapshot" not in data:
            return data
        data = dict(data)
        location = data.pop("snapshot")
        if "files" in data:
            raise ValueError("give `snapshot` or `files`, not both")
        if not isinstance(location, str):
            raise ValueError("snapshot: expected a path, relative to the task file")
        folder = (info.context or {}).get("folder")
        if folder is None:
            raise ValueError("snapshot: a path needs the task file's folder; this record comes "
                             "from no file (a sealed source holds the tree itself)")
        try:
            data["files"] = read_snapshot(Path(folder) / location, data.get("base_commit"))
        except SnapshotError as error:
            raise ValueError(f"snapshot: {error}") from None
        return data

    @model_validator(mode="before")
    @classmethod
    def _group_defaults_to_id(cls, data: Any) -> Any:
        # The repository is the group: the split keeps one repository's tasks together.
        if isinstance(data, dict) and data.get("group") is None and "repo" in data:
            return {**data, "group": data["repo"]}
        return data

    @field_validator("entry_point")
    @classmethod
    def _no_entry_point(cls, value: str) -> str:
        if value != ENTRY_POINT:
            raise ValueError("a repository task has no entry point: leave the field out")
        return value

    @field_validator("files")
    @classmethod
    def _tree(cls, files: dict[str, str]) -> dict[str, str]:
        if not files:
            raise ValueError("the repository has no files")
        for path in files:
            if unsafe_path(path):
                raise ValueError(f"{path!r}: {unsafe_path(path)}")
        return files

    @field_validator("test_command")
    @classmethod
    def _command(cls, value: str) -> str:
        command_options(value)
        return value

    @field_validator("public_tests")
    @classmethod
    def _public(cls, text: str | None) -> str | None:
        if text is not None:
            nodes = json.loads(text) if text.strip().startswith("[") else None
            if not (isinstance(nodes, list) and nodes and all(isinstance(n, str) for n in nodes)):
                raise ValueError("expected a JSON list of test node ids, e.g. "
                                 '["tests/test_core.py::test_parse"]')
        return text

    @model_validator(mode="after")
    def _tests_apply(self) -> RepositoryTask:
        try:
            with_tests = apply_patch(self.files, parsed_patch(self.tests, "tests"))
        except PatchError as error:
            raise ValueError(f"tests: the hidden test patch does not apply to the repository: "
                             f"{error}") from None
        if self.reference is not None:
            try:
                apply_patch(self.files, parsed_patch(self.reference, "reference"))
            except PatchError as error:
                raise ValueError(f"reference: does not apply to the repository: {error}") \
                    from None
        missing = [node for node in self.expected_tests if node_file(node) not in with_tests]
        if missing:
            raise ValueError(f"{missing[0]!r}: no such test file in the repository with the "
                             "hidden tests")
        for node in self.public_nodes:
            if node_file(node) not in self.files:
                raise ValueError(f"public_tests: {node!r}: no such file in the repository")
        return self

    @property
    def expected_tests(self) -> list[str]:
        return self.fail_to_pass + self.pass_to_pass

    @property
    def public_nodes(self) -> list[str]:
        return json.loads(self.public_tests) if self.public_tests else []

    @property
    def hidden_paths(self) -> set[str]:
        """What the completion may not change: the hidden tests' files and the files of the
        tests the verdict reads."""
        return ({patch.path for patch in parse_patch(self.tests)}
                | {node_file(node) for node in self.expected_tests})


# --- the judged program -------------------------------------------------------------------


def sentinels(tree: dict[str, str], files: list[str]) -> tuple[dict[str, str], list[str]]:
    """`tree` with a must-fail test, named with a nonce drawn now, at the end of each of
    `files`; and their node ids. The checks of a task none of whose tests has a site to
    perturb: they catch a forgery that passes everything, not one that reads names."""
    tree, must_fail = dict(tree), []
    for path in files:
        failing = f"test_{secrets.token_hex(8)}"
        text = tree[path]
        tree[path] = (text + ("" if text.endswith("\n") else "\n")
                      + f"\n\ndef {failing}():\n    assert {failing!r} == {failing + '!'!r}\n")
        must_fail.append(f"{path}::{failing}")
    return tree, must_fail


def _node_function(node: str) -> tuple[str, str, str]:
    """(file, qualified function, parameters) of a node id `file::[Class::]name[params]`."""
    path, _, rest = node.partition("::")
    name, bracket, parameters = rest.partition("[")
    return path, name.replace("::", "."), bracket + parameters


def checked_tree(task: RepositoryTask, tree: dict[str, str], spec: dict[str, Any]
                 ) -> dict[str, str]:
    """`tree` (the diff and the hidden tests applied) with each `fail_to_pass` test function
    renamed and copied (heldout.tasks.perturbed_copies); `spec` gets the renamed node ids,
    the names to show, and the checks (the copies, else a sentinel per file)."""
    tree = dict(tree)
    wanted: dict[str, set[str]] = {}
    for node in task.fail_to_pass:
        path, function, _ = _node_function(node)
        wanted.setdefault(path, set()).add(function)
    renamed: dict[tuple[str, str], str] = {}
    checks: list[str] = []
    for path, functions in sorted(wanted.items()):
        try:
            checked = check_file(task.files.get(path, ""), tree[path], functions)
        except SyntaxError:
            continue  # it does not collect: the run says so
        tree[path] = checked.text
        renamed |= {(path, old): new for old, new in checked.renamed.items()}
        checks += [f"{path}::{copy.replace('.', '::')}" for copy in checked.copies]
    if not checks:
        files = sorted({node_file(node) for node in task.expected_tests})
        tree, checks = sentinels(tree, files)
    for kind in ("fail_to_pass", "pass_to_pass"):  # a renamed function's every case
        nodes = []
        for node in getattr(task, kind):
            path, function, parameters = _node_function(node)
            new = renamed.get((path, function), function)
            nodes.append(f"{path}::{new.replace('.', '::')}{parameters}")
        spec[kind] = nodes
        spec["names"] |= dict(zip(nodes, getattr(task, kind), strict=True))
    spec["checks"] = checks
    return tree


def build_program(task: RepositoryTask, completion: str, *, reveal: bool = False) -> Program:
    """The judged program for a diff on the task. `reveal` (validation) has the judge answer
    with every expected test's outcome."""
    spec: dict[str, Any] = {"fail_to_pass": task.fail_to_pass,
                            "pass_to_pass": task.pass_to_pass, "reveal": reveal,
                            "reason_chars": judge.REASON_CHARS, "dropped_note": "",
                            "names": {}, "checks": []}
    tree, refused = judged_tree(task, completion, spec)
    if not refused:
        tree = checked_tree(task, tree, spec)
    files = sorted({node_file(node) for node in task.expected_tests})
    argv = [*PYTEST, [*command_options(task.test_command), *JUDGE_OPTIONS, *files]]
    helpers = judge.JUDGE_HELPERS
    tests = f"judge_repository({judge.RUN_TESTS}, {json.dumps(spec)!r})\n"
    if refused:
        tree, tests = {}, f"{judge.RUN_TESTS}.fail({refused!r})\n"
    source = judge.CANDIDATE_RUNNER + judge.CANDIDATE_TAIL.format(
        tree=tree, argv=argv, name=judge.RUN_TESTS, limit=judge.REPORT_LIMIT)
    payload = json.dumps({"prompt": helpers, "entry_point": judge.RUN_TESTS, "tests": tests})
    image = task.runtime.image if task.runtime else None
    return Program(source=source, judge=payload, group=task.id, image=image)


def judged_tree(task: RepositoryTask, completion: str, spec: dict[str, Any]
                ) -> tuple[dict[str, str], str | None]:
    """(the tree the tests run on, why the completion is refused before any run, or None)."""
    try:
        patches = parse_patch(completion)
    except PatchError as error:
        return {}, f"the completion is not a unified diff: {error}"
    kept, dropped = filter_patch(patches, task.files, task.hidden_paths)
    spec["dropped_note"] = judge.dropped_note(dropped)
    try:
        changed = apply_patch(task.files, kept)
    except PatchError as error:
        return {}, f"the diff does not apply: {error}{spec['dropped_note']}"
    return apply_patch(changed, parse_patch(task.tests)), None


def patched_code(task: RepositoryTask) -> str:
    """The functions and classes the reference patch writes, whole, as it leaves them: what a
    training copy of the fix holds, whatever it renamed."""
    if task.reference is None:
        return ""
    try:
        fixed = apply_patch(task.files, parse_patch(task.reference))
    except PatchError:
        return ""
    parts = []
    for path in sorted(fixed):
        if not path.endswith(".py") or fixed[path] == task.files.get(path):
            continue
        written = written_lines(task.files.get(path, ""), fixed[path])
        try:
            tree = ast.parse(fixed[path])
        except SyntaxError:
            continue
        parts += [ast.get_source_segment(fixed[path], node) or "" for node in ast.walk(tree)
                  if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                  and written & set(range(node.lineno, (node.end_lineno or node.lineno) + 1))]
    return "\n\n".join(textwrap.dedent(part) for part in parts if part)


def public_task(task: RepositoryTask) -> RepositoryTask:
    """The task whose tests are its public ones: the repository's own tests the agent may run,
    with no hidden test patch."""
    return task.model_copy(update={"tests": "", "fail_to_pass": task.public_nodes,
                                   "pass_to_pass": []})


KIND = TaskKind(scorer_version=SCORER_VERSION, build_program=build_program,
                completes_prompt=False, public_task=public_task, program_text=patched_code)
