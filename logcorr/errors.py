"""The one error family logcorr raises for bad input.

Only `logcorr.cli.main` catches these: it prints `logcorr: error: <message>` and exits 2.
Every message says what is wrong and how to fix it.
"""

from __future__ import annotations


class LogcorrError(Exception):
    """Root of every error caused by the user's input (never by a bug)."""


class ConfigError(LogcorrError):
    """The launch configuration cannot be read or is not a layout SGLang would launch."""


class InputError(LogcorrError):
    """A path or option given on the command line cannot be used."""


class FixtureError(LogcorrError):
    """A regression fixture folder is malformed."""
