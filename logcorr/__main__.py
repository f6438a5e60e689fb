"""`python -m logcorr` runs the command-line interface."""

from logcorr.cli import main_entry

main_entry()
