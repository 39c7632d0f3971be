"""`python -m memcli` runs the CLI."""

from memcli.cli.app import main

main()
