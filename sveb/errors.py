"""One base class for the errors SVEB reports to a user in one line (bad flag, file, row or state).

The CLI prints these as `error: <message>`; anything else is a bug and keeps its traceback.
The second base of each subclass keeps `except ValueError` / `except RuntimeError` callers working.
"""


class SvebError(Exception):
    pass


class UsageError(SvebError, ValueError):
    """A bad flag, parameter or file named by the user."""


class BuildError(SvebError, ValueError):
    pass


class EvalError(SvebError, RuntimeError):
    pass
