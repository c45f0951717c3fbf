"""The `heldout` command: the typer app (`cli.main`) and its commands, the outermost layer above
flows, stages and the core. A user's error prints as one line and exits 2."""
