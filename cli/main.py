"""The `heldout` command: the outermost layer, above flows, stages and the core. Errors a
user can cause print as one message and exit 2.

Imports stay inside the commands: `heldout --help` must not pay for prefect or mlflow.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from cli import imports, judge_trust, recall, recipes, scoring_options, usage
from cli import params as params_commands
from cli import samples as samples_commands
from cli import tasks as tasks_commands
from cli.command_runs import log_compare
from cli.custody import audit, key, ledger_app
from cli.plan import plan
from cli.probe import probe
from cli.sweeps import sweeps
from flows import ERROR_FILE_ENV, PIPELINE_RUN_ENV
from flows.terminal import quiet_console, quiet_environment, set_verbose
from flows.warm import WARM_ENV
from heldout.errors import HeldoutError, StageError

app = typer.Typer(
    help="heldout: is checkpoint B really better than checkpoint A? Split, decontaminate, "
    "roll out, score, select, test once, report.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
tasks_app = typer.Typer(help="Inspect, validate and seal task files.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")
tasks_app.command("seal")(tasks_commands.seal)
tasks_app.command("import-swebench")(tasks_commands.import_swebench)
params_app = typer.Typer(help="Change params.yaml.", no_args_is_help=True)
app.add_typer(params_app, name="params")
params_app.command("use")(params_commands.use)
app.add_typer(ledger_app, name="ledger")
app.command()(key)
app.command()(probe)
app.command()(plan)
app.command()(sweeps)
stderr = Console(stderr=True)
stdout = Console()


@app.callback()
def options(
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Also Prefect's per-run log lines and DVC's own (as "
                                "HELDOUT_VERBOSE=1 does).")] = False,
) -> None:
    set_verbose(verbose)
    quiet_environment()  # before prefect or mlflow is imported, here or in a process it starts


def available_stages() -> list[str]:
    """A stage is a module of `stages/` with a flow module of the same name in `flows/`."""
    import flows
    import stages

    def modules(package: object) -> set[str]:
        return {module.name for module in pkgutil.iter_modules(package.__path__)}

    return sorted(modules(flows) & modules(stages))


@app.command()
def stage(
    name: Annotated[str, typer.Argument(help="The stage to run, as dvc.yaml calls it.")],
    checkpoint: Annotated[
        str | None, typer.Option(help="The checkpoint, for stages run once per checkpoint.")
    ] = None,
) -> None:
    """Run one pipeline stage (what dvc.yaml calls): as a Prefect flow when there is a Prefect
    API (the pipeline's, or PREFECT_API_URL), else as a plain function, without a server."""
    from flows.params import check_params_file, prefect_wanted
    from heldout.custody.restage import keep_staged_after_experiment
    from heldout.environment import apply_defaults, find_project_root

    root = find_project_root()
    apply_defaults(root)
    if name not in available_stages():
        raise StageError(f"unknown stage '{name}'; the stages are: "
                         f"{', '.join(available_stages())}")
    pipeline_run = os.environ.get(PIPELINE_RUN_ENV)
    if name == "split" and not pipeline_run:
        # The first stage `dvc repro` runs: all of params.yaml, before anything is written
        # (the pipeline checked it already, before any stage).
        check_params_file(root)
    # A workspace `dvc exp run` unstages the ledger after its last stage; one waits for that.
    keep_staged_after_experiment(root)
    arguments = {} if checkpoint is None else {"checkpoint": checkpoint}
    if not prefect_wanted(root):
        # No Prefect API and not under the pipeline (a bare `dvc repro`, `dvc exp run`):
        # Prefect would start a temporary server for this one process (7-8 s a stage, NOTES.md)
        # only to record a flow run nobody can look at afterwards. The stage runs as it does in
        # its flow, its episodes on threads; MLflow and the test-access ledger are the stage's.
        importlib.import_module(f"stages.{name}").run(**arguments)
        return
    from flows import run_stage_flow

    quiet_console()
    run_stage_flow(name, pipeline_run, **arguments)


@app.command()
def pipeline(
    targets: Annotated[
        list[str] | None, typer.Argument(help="Stages to bring up to date (default: all).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Run the stages even if DVC finds them up to date.")
    ] = False,
) -> None:
    """`dvc repro` as one Prefect flow: DVC decides what is stale; every stage reports to one
    Prefect API (PREFECT_API_URL, else a private server for this run); MLflow gets a summary.
    params.yaml is checked whole before any stage runs; with nothing stale, nothing starts."""
    from flows.params import check_params_file
    from heldout.environment import apply_defaults, find_project_root
    from stages.params_check import name_problems, read_params

    root = find_project_root()
    apply_defaults(root)
    if name_problems(read_params(root)):  # DVC cannot expand dvc.yaml: say every problem now
        check_params_file(root)
    from flows.plan import plan

    found = plan(root, targets or None, force)
    if found.stale is None:
        stdout.print(f"pipeline: nothing to do, {len(found.planned)} stages up to date",
                     highlight=False)
        return
    check_params_file(root)
    server = ("Prefect at PREFECT_API_URL" if os.environ.get("PREFECT_API_URL") else
              "a Prefect server of its own on loopback (tens of seconds)")
    stdout.print(f"pipeline: {len(found.planned)} stages, DVC runs what is stale from "
                 f"{found.stale} on{_cost(root, targets, force)}; starting {server}; each "
                 "stage prints its line as it ends",
                 highlight=False, soft_wrap=True)  # one line however narrow the terminal
    from flows.pipeline import pipeline_flow
    from flows.server import prefect_api

    quiet_console()
    with prefect_api():
        summary = pipeline_flow(targets=targets or None, force=force, root=str(root))
    counts = summary["counts"]
    stdout.print(
        f"pipeline: {counts['ran']} stages ran, {counts['up_to_date']} up to date, in "
        f"{summary['wall_s']:.1f} s; dvc.lock {str(summary['dvc_lock_sha256'])[:12]}",
        highlight=False,
    )


def _cost(root: Path, targets: list[str] | None, force: bool) -> str:
    """The cost before the spend: ", about N episodes (expected …)" for a whole run, as
    `heldout plan` counts it; nothing for chosen targets or --force, which it does not
    count. What cannot be counted yet (a sealed task source before its split, or a source the
    split stage will say is broken) is said once, by the stage, and never stops the run."""
    if targets or force:
        return ""
    from cli.plan import run_forecast, split_counts
    from flows.plan import stages_to_run
    from stages.params_check import read_params

    params = read_params(root)
    try:
        counts = split_counts(root, params)[0]
    except HeldoutError:  # a sealed source, or one the split stage will name as broken
        return " (its cost is not known until the split has run)"
    found, _ = run_forecast(root, params, counts, stages_to_run(root))
    return f", about {found.episodes:,} episodes ({found.pace()})"


@app.command()
def serve() -> None:
    """Serve the nightly deployment of the pipeline flow (cron: params.orchestration) until
    stopped. Needs a Prefect server: PREFECT_API_URL."""
    from heldout.environment import apply_defaults, find_project_root

    root = find_project_root()
    apply_defaults(root)
    from flows.deploy import serve_nightly

    serve_nightly(root)


@app.command()
def deploy(
    pool: Annotated[str, typer.Option(help="The work pool (`prefect work-pool create NAME "
                                           "--type process`).")],
    source: Annotated[Path | None, typer.Option(
        metavar="PATH", help="Deploy a clone of HEAD made in PATH/<commit>, for a worker on "
                             "this machine, instead of the git remote.")] = None,
    remote: Annotated[str, typer.Option(help="The git remote the worker clones.")] = "origin",
    work_dir: Annotated[str | None, typer.Option(
        help="An existing folder on the worker's machine for the clone, kept between runs "
             "(default: a temporary folder per run, gone with it).")] = None,
) -> None:
    """Deploy the nightly pipeline (cron: params.orchestration) to a work pool, pinned to
    HEAD's commit: the worker runs that commit, whatever the checkout holds later. Needs a
    Prefect server: PREFECT_API_URL."""
    from flows.deploy import FORWARDED_ENV, deploy_to_pool
    from heldout.environment import apply_defaults, find_project_root

    # What the user set, before the project's defaults fill in the rest.
    forwarded = {name: os.environ[name] for name in FORWARDED_ENV if os.environ.get(name)}
    root = find_project_root()
    apply_defaults(root)
    for line in deploy_to_pool(root, pool, source=source, remote=remote, work_dir=work_dir,
                               forwarded=forwarded):
        stdout.print(line, highlight=False, soft_wrap=True, markup=False)


@tasks_app.command("validate")
def tasks_validate(
    source: Annotated[str, typer.Argument(help="A JSONL task file, or 'humaneval'.")],
    sandbox: Annotated[str, typer.Option(
        help="Where repository tasks' base and reference are judged.")] = "subprocess",
    run: Annotated[bool, typer.Option(
        help="Judge repository tasks' base and reference (--no-run: the schema only).")] = True,
) -> None:
    """Check every line of a task file; print one OK line, or every problem with its line.
    Repository tasks are also judged at their base and with their reference."""
    from heldout.tasks.record import tasks_digest
    from heldout.tasks.sources import load_tasks

    tasks = load_tasks(source if source == "humaneval" else Path(source))
    if run:
        tasks_commands.check_repositories(tasks, sandbox)
    groups = len({t.group for t in tasks})
    stdout.print(f"OK: {len(tasks)} tasks in {groups} groups in {source} "
                 f"(digest {tasks_digest(tasks)[:12]})", highlight=False, soft_wrap=True)


@app.command()
def compare(
    base: Annotated[Path, typer.Argument(
        metavar="A", help="The base: a rollout file (.parquet), a samples file (.jsonl: "
                          "task_id, completion) or another harness's results (see import).")],
    candidate: Annotated[Path, typer.Argument(
        metavar="B", help="The candidate, the same way (A1,A2,A3 B1,B2,B3: recipes, by seed).")],
    out: Annotated[
        Path, typer.Option(help="Folder for report.md, report.html, report.json, figures/ "
                                "(and scored/: samples files scored, reused when unchanged).",
                           file_okay=False)
    ],
    sample: scoring_options.SampleOption = 0,
    allow_harness_mismatch: scoring_options.AllowMismatchOption = False,
    base_name: scoring_options.BaseNameOption = None,
    candidate_name: scoring_options.CandidateNameOption = None,
    rerun_a: scoring_options.RerunAOption = None,
    rerun_b: scoring_options.RerunBOption = None,
    reference_a: scoring_options.ReferenceAOption = None,
    reference_b: scoring_options.ReferenceBOption = None,
    target_effect: scoring_options.TargetEffectOption = None,
    selector: scoring_options.SelectorOption = "public_passed",
    groups: scoring_options.GroupsOption = None,
    score_key: scoring_options.ScoreKeyOption = None,
    group_key: scoring_options.GroupKeyOption = None,
    tasks: scoring_options.TasksOption = None,
    sandbox: scoring_options.SandboxOption = "subprocess",
    timeout_s: scoring_options.TimeoutOption = None,
    memory_mb: scoring_options.MemoryOption = None,
    workers: scoring_options.WorkersOption = None,
    mlflow: scoring_options.CompareMlflowOption = None,
    trust: judge_trust.JudgeTrustOption = None,
    cutoff_a: scoring_options.CutoffAOption = None,
    cutoff_b: scoring_options.CutoffBOption = None,
) -> None:
    """The paired report of B against A from any two rollout or samples files (samples are
    scored first, as `heldout score` does) or other harnesses' results (refused unless
    comparable), no pipeline needed. A file compared with itself (or a byte-for-byte copy) is a
    warning, not an error: the report is written, with every difference 0. Arms whose rows say
    they ran at different times are "not decidable" unless a reference checkpoint ran beside
    each (--reference-a, --reference-b). A1,A2,A3 B1,B2,B3: two recipes, a file per seed."""
    from heldout.report import build_report, headline_markdown, read_rollouts, write_report
    from heldout.report.inputs import same_input_warning
    from heldout.statistics.counts import pool_runs

    if (reference_a is None) != (reference_b is None):
        raise typer.BadParameter("give both --reference-a and --reference-b (one reference "
                                 "checkpoint's run beside each arm), or neither")

    setup = samples_commands.scoring(tasks, sandbox, timeout_s, memory_mb, workers, groups=groups)
    if recipes.seeded(base, candidate):  # seed files: the seed is the unit (cli/recipes.py)
        return recipes.compare(
            base, candidate, out, setup, target_effect, (base_name, candidate_name),
            checkpoint_only=(rerun_a, rerun_b, reference_a, reference_b, allow_harness_mismatch,
                             cutoff_a, cutoff_b))
    same = same_input_warning(base, candidate)
    given = (base, candidate)
    arms = imports.compare_arms(base, candidate, out, setup, score_key, group_key)
    base, candidate = arms.paths
    base_table, candidate_table, reruns = pool_runs(
        [read_rollouts(base), *map(read_rollouts, rerun_a or [])],
        [read_rollouts(candidate), *map(read_rollouts, rerun_b or [])])
    if same is not None:  # once the files read: a broken one is its own error, alone
        stderr.print(f"warning: {same}", markup=False, highlight=False, soft_wrap=True)
    labels = setup.groups({base: base_table, candidate: candidate_table})
    imports.check_selector(selector, {base: base_table, candidate: candidate_table})
    reference, passable = imports.reference_inputs(reference_a, reference_b, base_table,
                                                   candidate_table, labels)
    judged = judge_trust.judge_inputs(trust, arms)
    report = build_report(
        base_table, candidate_table,
        groups=labels, reruns=reruns, reference=reference, passable=passable, selector=selector,
        base_name=base_name, candidate_name=candidate_name,
        sample=sample, allow_harness_mismatch=allow_harness_mismatch or arms.mixed,
        target_effect=target_effect, **judged,
        dates=imports.release_dates(setup, base_table, (cutoff_a, cutoff_b)),
    )
    written = write_report(report, out)
    stdout.print(headline_markdown(report), markup=False, highlight=False, soft_wrap=True)
    stdout.print(f"wrote {', '.join(str(path.relative_to(out)) for path in written)} in {out}",
                 markup=False, highlight=False, soft_wrap=True)
    if mlflow or (mlflow is None and arms.protocol is not None):
        stdout.print(f"MLflow run {log_compare(report, out, given)}", markup=False, highlight=False)


app.command()(samples_commands.score)
app.command("import")(imports.import_command)
app.command("judge-trust")(judge_trust.judge_trust)
app.command("probe-recall")(recall.probe_recall)
app.command()(audit)


@app.command()
def abort(
    access_id: Annotated[str, typer.Argument(help="The open access, as `heldout audit` names it.")],
    reason: Annotated[str, typer.Option(help="Why the access ends without a result (recorded).")],
) -> None:
    """Close a test access that was opened and never closed (a killed stage) without a result:
    appends an "aborted" ledger line under the test key. The access still counts as one look."""
    from heldout.custody.anchor import stage_ledger
    from heldout.custody.audit import abort_access
    from heldout.custody.keys import load_keys
    from heldout.environment import apply_defaults, find_project_root
    from stages.catalog import LEDGER

    root = find_project_root()
    apply_defaults(root)
    entry = abort_access(root / LEDGER, access_id, reason, load_keys().current)
    say = {"highlight": False, "soft_wrap": True, "markup": False}
    stdout.print(f"aborted access {access_id}: ledger line {entry['seq']} of {LEDGER}, "
                 f"candidate {entry.get('candidate')} vs {entry.get('base')} on "
                 f"{entry.get('test_version')}, MLflow run {entry.get('mlflow_run_id')}, "
                 f"MAC'd under test key {entry['key_id']}; reason: {entry['reason']}", **say)
    stdout.print(stage_ledger(root), **say)


def main() -> None:
    if sys.argv[1:2] == ["stage"] and os.environ.get(WARM_ENV):
        # Under the pipeline: become a fork of its warm starter rather than start cold.
        from flows.warm import forward

        code = forward(sys.argv[1:])
        if code is not None:
            sys.exit(code)
    try:
        usage.run(app)  # a wrong command line: one line, exit 2
    except HeldoutError as error:
        report_error(error)
        sys.exit(2)


def report_error(error: HeldoutError) -> None:
    """One message, no traceback. A stage under the pipeline hands it to the pipeline instead,
    which prints it after its line for the stage, as the last thing on the terminal."""
    handed = os.environ.get(ERROR_FILE_ENV)
    if handed:
        try:
            Path(handed).write_text(str(error), encoding="utf-8")
            return
        except OSError:
            pass
    stderr.print(Text.assemble(("error:", "bold red"), f" {error}"), highlight=False,
                 soft_wrap=True)


if __name__ == "__main__":
    main()
