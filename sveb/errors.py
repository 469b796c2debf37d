"""One base class for the errors SVEB reports to a user in one line (bad flag, file, row or state).

The CLI prints these as `error: <message>`; anything else is a bug and keeps its traceback.
"""


class SvebError(Exception):
    pass


class BuildError(SvebError, ValueError):
    pass
