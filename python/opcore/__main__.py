"""`python -m opcore ARGS...` runs the `opcore` command (docs/cli.md)."""
from opcore.cli import main

main()
