"""`python -m niroc ...` runs the same command as the `niroc` console script."""

from niroc.cli import run

run()
