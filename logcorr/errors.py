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


class CoreError(LogcorrError):
    """The compiled line core failed on a chunk (a bug, never the input's fault: a panic the
    core caught). Its message names the files being read; the run ends without a traceback."""


class EngineError(LogcorrError):
    """The cluster an engine runs on could not do the work (no cluster at the address, a
    worker that died more often than the engine retries it); the message says what to check."""


def quoted(value: object, keep: int = 40) -> str:
    """A value as a message shows it: its repr, cut when long (a message is one line, and a
    value from a log or a config can be megabytes).

    >>> print(quoted("x" * 100))
    'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... (102 characters)
    """
    text = repr(value)
    return text if len(text) <= keep else f"{text[:keep - 1]}... ({len(text):,} characters)"
