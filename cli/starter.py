"""`python -m cli.starter SOCKET`: the warm starter process (flows/warm.py), serving forks
that become the `heldout` command. It lives apart from both so that neither imports the other.
"""

import sys
from pathlib import Path

from cli.main import main
from flows.warm import serve

if __name__ == "__main__":
    serve(Path(sys.argv[1]), become=main)
