"""What heldout's processes print: the stages' own lines, one line per stage from the pipeline,
one message per error. Prefect's per-run INFO lines (a flow run began, a task run finished in
state Completed, a link to the run) and MLflow's links to each run on a tracking server are off
unless `heldout -v` or HELDOUT_VERBOSE=1.

They are turned off where they are printed, not where they are recorded: Prefect's console
handler goes to WARNING (PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL, set in the environment before
prefect is imported, so every process heldout starts inherits it), while its API handler still
sends every run log to the Prefect server, whose UI shows them as before.

Prefect also logs an exception a flow or task run raised, traceback and all, and the failed
state it ended in, before it re-raises the exception to the caller. The caller reports it once
(one line for a user error, a traceback for a bug), so the console drops those records
(`quiet_console`, called once prefect is imported).

Only the standard library at import: `heldout --help` and a no-op pipeline import this.
"""

from __future__ import annotations

import logging
import os

VERBOSE_ENV = "HELDOUT_VERBOSE"
QUIET_ENV = {
    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "WARNING",
    # MLflow writes "🏃 View run … at: URL" and "🧪 View experiment at: URL" to stdout as each
    # run ends when the store is a tracking server: a pair per stage between the status lines.
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}
# MLflow announces creating and migrating its database at INFO on a new store.
QUIET_LOGGERS = ("mlflow.store.db.utils", "alembic.runtime.migration")
RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "").lower() not in ("", "0", "false", "no")


def set_verbose(on: bool) -> None:
    """`heldout -v`: for this process and every process it starts."""
    if on:
        os.environ[VERBOSE_ENV] = "1"


def quiet_environment() -> None:
    """Before prefect or mlflow is imported: their INFO chatter off (a user's own setting wins).
    Processes started from here inherit it, so the stage processes DVC starts are as quiet."""
    if verbose():
        return
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


class RaisedToTheCaller(logging.Filter):
    """Drops, on the console only, a run logger's record of an exception it re-raises: the
    traceback, and the run's failed final state."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(RUN_LOGGERS):
            return True
        return not (record.exc_info or str(record.msg).startswith("Finished in state"))


def quiet_console() -> None:
    """Once prefect is imported (it configures logging then): its console handler stops
    printing the exceptions that flow and task runs raise to their callers."""
    if verbose():
        return
    from prefect.logging.handlers import PrefectConsoleHandler

    for handler in logging.getLogger().handlers:
        if isinstance(handler, PrefectConsoleHandler) and not any(
                isinstance(f, RaisedToTheCaller) for f in handler.filters):
            handler.addFilter(RaisedToTheCaller())
