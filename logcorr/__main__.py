"""`python -m logcorr` runs the command-line interface."""

from logcorr.launch import main

main()
