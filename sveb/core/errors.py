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


class ConfigError(SvebError, ValueError):
    """A build manifest's config with a value of the wrong type."""


def brief(e: BaseException, limit: int = 200) -> str:
    """A library exception's text on one line (pyarrow's thrift errors span lines), cut at `limit` characters."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def did_you_mean(name: str, known, n: int = 1) -> str:
    """'; did you mean X?' for a near miss among `known`, else '; known: A, B, ...' (appended to an error)."""
    import difflib
    known = list(known)
    near = difflib.get_close_matches(str(name), known, n=n)
    return f"; did you mean {', '.join(near)}?" if near else f"; known: {', '.join(known)}"


def path_like(spec: str) -> bool:
    """Whether a spec names a local path rather than a hub id or a fingerprint: it starts with / . ~ or holds a
    backslash or more than one slash (a hub id is OWNER/NAME), or something exists there."""
    from pathlib import Path
    s = str(spec)
    return (s.startswith(("/", ".", "~")) or "\\" in s or s.count("/") > 1
            or Path(s).expanduser().exists())
