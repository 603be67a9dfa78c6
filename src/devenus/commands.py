"""What every command line of DE-Venus shares: which errors are the user's to fix, how one is shown, how
a command function runs, and the argparse types more than one command uses.

Below both the main CLI (:mod:`devenus.cli`) and the packages' own command lines (``devenus.records.cli``
runs standalone too), so that neither imports the other for these (no import cycle).
"""

from __future__ import annotations

import os
import sys

from devenus.config import arg_type


class RunFailed(RuntimeError):
    """A training run that did not finish (raised by :mod:`devenus.runs.launch`); the message names its log
    and the error it ended with."""


#: exceptions that are the user's to fix: shown as one line, never as a traceback
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError, RunFailed)


#: argparse type: a number in [0, 1], checked like a config key (a usage error otherwise)
fraction = arg_type(float, ge=0.0, le=1.0)


def describe_error(exc: BaseException) -> str:
    """One line for a user error: what failed and where, without the exception's class."""
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror[:1].lower() + exc.strerror[1:]
        return f"{text}: {exc.filename}" if exc.filename else text
    return str(exc) or type(exc).__name__


def run_command(fn, args) -> int:
    """Run a command function; a user error becomes ``error: ...`` on stderr and exit code 1."""
    try:
        return fn(args) or 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except USER_ERRORS as exc:
        if os.environ.get("DEVENUS_DEBUG"):
            raise
        print(f"error: {describe_error(exc)}", file=sys.stderr)
        return 1
