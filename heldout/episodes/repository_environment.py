"""The `repository` kind's environment: the agent reads and edits a repository, runs commands
in a sandbox of its own and submits; its answer is the diff of what it changed.

The agent's tree is held here, in memory, starting from the task's `files`: the repository at
its base commit and nothing else. No `.git` (so no later commits, branches, tags, remotes,
reflog or packed objects that hold them), no hidden test patch, no reference. Each `run` writes
the tree into a fresh sandbox program (no network, nothing left from an earlier run) and runs
the command there under the episode's time limit; what a command writes to files is not kept
(the observation says which files it changed): files change through `write_file` and `edit`.
`run_public_tests` runs the task's public tests through the judge, as the alarm does.
`submit` ends the episode with the diff (heldout.tasks.patches.diff_trees) from the base; a
diff larger than heldout applies (MAX_DIFF_BYTES, 1 MiB) is not submitted, and the agent is told.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from heldout.agents.protocol import ToolSpec
from heldout.canonical import safe_text
from heldout.episodes.budgets import ExecLimits
from heldout.episodes.tool_result import ToolResult
from heldout.sandbox.protocol import Program, Sandbox
from heldout.tasks.diff_filter import unsafe_path
from heldout.tasks.patches import MAX_DIFF_BYTES, diff_trees, oversized
from heldout.tasks.repository import RepositoryTask, build_program, public_task
from heldout.tasks.repository_judge import revealed

READ_CHARS = 20_000  # of a file read_file returns
LISTED_FILES = 500
OUTPUT_CHARS = 2_000  # of a command's output (a sandbox keeps 4 KiB of a program's stdout)
_SENTINEL = re.compile(r"^.*::test_[0-9a-f]{16}\b.*$\n?", re.MULTILINE)
_NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}


def _object(**properties: str) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": list(properties),
            "properties": {name: {"type": "string", "description": text}
                           for name, text in properties.items()}}


REPOSITORY_TOOL_SPECS = {
    "list_files": ToolSpec("list_files", "List the repository's files under a folder ('' for "
                           "all).", _object(path="a folder, relative to the repository root")),
    "read_file": ToolSpec("read_file", "Read one file of the repository.",
                          _object(path="the file, relative to the repository root")),
    "write_file": ToolSpec("write_file", "Write a whole file (created if missing).",
                           _object(path="the file, relative to the repository root",
                                   content="its whole new text")),
    "edit": ToolSpec("edit", "Replace one exact occurrence of `old` with `new` in a file.",
                     _object(path="the file", old="text that occurs exactly once",
                             new="what replaces it")),
    "run": ToolSpec("run", "Run a shell command at the repository root, in a sandbox with no "
                    "network; returns its exit status and output. What it writes to files "
                    "is not kept.", _object(command="the command, for /bin/sh -c")),
    "run_public_tests": ToolSpec("run_public_tests", "Run the task's public tests on the "
                                 "repository as it is now; returns each test's outcome.",
                                 _NO_ARGUMENTS),
    "submit": ToolSpec("submit", "Submit the repository as it is now (its diff from the "
                       "start), or the unified diff given as `code`; ends the episode.",
                       {"type": "object", "additionalProperties": False, "properties": {
                           "code": {"type": "string", "description": "a unified diff"}}}),
}
FILE_TOOLS = ("list_files", "read_file", "write_file", "edit", "run")


@dataclass
class RepositoryEnvironment:
    task: RepositoryTask
    sandbox: Sandbox
    limits: ExecLimits
    template: str
    tool_names: tuple[str, ...]
    tree: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.tree = dict(self.task.files)

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        return tuple(REPOSITORY_TOOL_SPECS[name] for name in (*FILE_TOOLS, *self.tool_names))

    @property
    def last_program(self) -> str | None:
        return self.diff() or None

    def diff(self) -> str:
        return diff_trees(self.task.files, self.tree)

    def opening(self) -> str:
        return self.template.format(prompt=self.task.prompt)

    def call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        expected = set(REPOSITORY_TOOL_SPECS[tool].parameters["properties"])
        if tool == "submit" and not arguments:
            expected = set()  # the tree as it is; a single-shot agent's submit gives `code`
        if set(arguments) != expected or not all(isinstance(v, str) for v in arguments.values()):
            return ToolResult(f"{tool} takes {', '.join(sorted(expected)) or 'no arguments'} "
                              f"(strings); got {sorted(arguments)}", {"error": "bad arguments"})
        answer = getattr(self, f"_{tool}")(**{name: safe_text(value)
                                              for name, value in arguments.items()})
        return ToolResult(safe_text(answer.text), answer.data, answer.submitted)

    def _list_files(self, path: str) -> ToolResult:
        folder = path.strip("/")
        found = sorted(name for name in self.tree
                       if not folder or name == folder or name.startswith(folder + "/"))
        shown = found[:LISTED_FILES]
        more = f"\n... and {len(found) - len(shown)} more" if len(found) > len(shown) else ""
        return ToolResult("\n".join(shown) + more if found else f"No files under {path!r}.",
                       {"files": len(found)})

    def _read_file(self, path: str) -> ToolResult:
        if path not in self.tree:
            return ToolResult(f"No such file: {path!r}.", {"error": "no such file"})
        text = self.tree[path]
        cut = f"\n[... {len(text) - READ_CHARS} more characters]" if len(text) > READ_CHARS \
            else ""
        return ToolResult(text[:READ_CHARS] + cut, {"chars": len(text)})

    def _write_file(self, path: str, content: str) -> ToolResult:
        unsafe = unsafe_path(path)
        if unsafe:
            return ToolResult(f"Cannot write {path!r}: {unsafe}.", {"error": unsafe})
        created = path not in self.tree
        self.tree[path] = content
        return ToolResult(f"{'Created' if created else 'Wrote'} {path} "
                          f"({len(content)} characters).", {"written": path})

    def _edit(self, path: str, old: str, new: str) -> ToolResult:
        if path not in self.tree:
            return ToolResult(f"No such file: {path!r}.", {"error": "no such file"})
        count = self.tree[path].count(old) if old else 0
        if count != 1:
            return ToolResult(f"`old` occurs {count} times in {path}; it must occur exactly once.",
                           {"error": "not unique", "occurrences": count})
        self.tree[path] = self.tree[path].replace(old, new, 1)
        return ToolResult(f"Edited {path}.", {"edited": path})

    def _run(self, command: str) -> ToolResult:
        result = self.sandbox.run(command_program(self.tree, command, self.limits.timeout_s),
                                  timeout_s=self.limits.timeout_s + 2.0,
                                  memory_mb=self.limits.memory_mb)
        try:
            ran = json.loads(result.stdout_tail.strip().rpartition("\n")[2])
        except ValueError:
            return ToolResult(f"The command could not be run ({result.status}).",
                           {"status": result.status})
        status = "timed out" if ran["exit"] is None else f"exit status {ran['exit']}"
        changed = ran["changed"]
        note = (f"\n(It changed {len(changed)} file(s), not kept: {', '.join(changed[:5])}; "
                "use write_file or edit.)" if changed else "")
        return ToolResult(f"[{status}]\n{ran['output']}{note}",
                       {"exit": ran["exit"], "changed": len(changed)})

    def _run_public_tests(self) -> ToolResult:
        public = public_task(self.task)
        if not public.fail_to_pass:
            return ToolResult("This task has no public tests.", {"passed": None})
        result = self.sandbox.run(build_program(public, self.diff(), reveal=True),
                                  timeout_s=self.limits.timeout_s,
                                  memory_mb=self.limits.memory_mb)
        account = revealed(result, public.fail_to_pass)
        if account is None:
            reason = result.stderr_tail.strip().rpartition("\n")[2]
            return ToolResult(f"The public tests did not run: {reason[:500]}",
                              {"passed": False, "status": result.status})
        outcomes = account["outcomes"]
        failed = {test: outcome for test, outcome in outcomes.items() if outcome != "passed"}
        lines = [f"{len(outcomes) - len(failed)} of {len(outcomes)} public tests passed."]
        lines += [f"  {test}: {outcome}" for test, outcome in failed.items()]
        output = _SENTINEL.sub("", result.stdout_tail)[-OUTPUT_CHARS:]
        return ToolResult("\n".join(lines) + (f"\n\npytest's output:\n{output}" if failed else ""),
                       {"passed": not failed, "failed": sorted(failed)})

    def _submit(self, code: str | None = None) -> ToolResult:
        diff = self.diff() if code is None else code
        too_large = oversized(diff, "The diff" if code is None else "The diff given")
        if too_large:
            return ToolResult(f"{too_large}. Not submitted: make a smaller change.",
                              {"error": "diff too large", "limit": MAX_DIFF_BYTES})
        return ToolResult("Submitted." if diff else "Submitted an unchanged repository.",
                       {"submitted": True}, submitted=diff)


_RUN_COMMAND = """
import json, os, subprocess

TREE = {tree!r}
here = os.getcwd()
root = os.path.join(here, "repo")
for path, text in TREE.items():
    target = os.path.join(root, path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "w", encoding="utf-8", newline="") as file:
        file.write(text)
env = {{"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": here, "TMPDIR": here,
       "PYTHONPATH": root, "PYTHONDONTWRITEBYTECODE": "1"}}
try:
    done = subprocess.run(["/bin/sh", "-c", {command!r}], cwd=root, env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout={timeout_s!r})
    code, output = done.returncode, done.stdout
except subprocess.TimeoutExpired as error:
    code, output = None, error.output or b""
changed = []
for folder, _, names in os.walk(root):
    for name in names:
        path = os.path.relpath(os.path.join(folder, name), root)
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as file:
                same = TREE.get(path) == file.read()
        except (OSError, UnicodeDecodeError):
            same = False
        if not same and "__pycache__" not in path and ".pytest_cache" not in path:
            changed.append(path)
changed += [path for path in TREE if not os.path.exists(os.path.join(root, path))]
text = output.decode("utf-8", "replace")
print(json.dumps({{"exit": code, "output": text[-{chars}:], "changed": sorted(changed)[:20]}}))
"""


def command_program(tree: dict[str, str], command: str, timeout_s: float) -> Program:
    """The sandbox program that writes `tree` and runs `command` at its root."""
    return Program(source=_RUN_COMMAND.format(tree=tree, command=command, timeout_s=timeout_s,
                                              chars=OUTPUT_CHARS))
