"""How the `heldout` command reads its command line: a wrong option, argument or command is one
line naming it (`error: Invalid value for '--workers': -3 is not in the range 1<=x<=1024.`) and
exit 2, as every error a user can cause is (cli/main.py), instead of click's boxed usage text.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.text import Text


def run(app: typer.Typer) -> None:
    """Run the command line through `app`, exiting with its code; a HeldoutError or a bug
    passes through to the caller."""
    try:
        code = app(standalone_mode=False)
    except typer.TyperException as error:  # click's own: the command line is wrong
        if type(error).__name__ == "NoArgsIsHelpError":  # `heldout tasks`: its help, as ever
            error.show()
            sys.exit(error.exit_code)
        message = " ".join(error.format_message().split())
        context = getattr(error, "ctx", None)
        hint = f" (see {context.command_path} --help)" if context is not None else ""
        Console(stderr=True).print(Text.assemble(("error:", "bold red"), f" {message}{hint}"),
                                   highlight=False, soft_wrap=True)
        sys.exit(error.exit_code)
    except typer.Abort:
        sys.exit(1)
    if isinstance(code, int) and not isinstance(code, bool) and code:  # typer.Exit(code)
        sys.exit(code)
