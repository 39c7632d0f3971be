"""`python -m memcli` runs the CLI."""

from memcli.cli import main

main()
