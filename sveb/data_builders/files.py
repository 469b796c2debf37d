"""Rows of local data files (.jsonl, .jsonl.gz, .json, .json.gz, .parquet, .csv, .csv.gz, or a folder of them)
and of hub datasets. A row that cannot be decoded is handed on as a SkipRow and counted, never fatal; a file that
cannot be read at all (a truncated or non-gzip .gz, JSON nested too deeply) is one SourceError naming it. Text is
read as utf-8-sig: the byte-order mark Excel and Notepad write is dropped, not taken for part of a column name."""

from __future__ import annotations

import csv
import gzip
import io
import json
import sys
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from sveb.core.errors import brief
from sveb.data_builders import SkipRow, SourceError

SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".parquet", ".csv", ".csv.gz")

# (file, 1-based row number, row or SkipRow)
Row = tuple[str, int, object]


def kind(path: Path) -> str | None:
    """The format of a data file by its name, or None if it is not one."""
    name = path.name.lower()
    return next((s for s in SUFFIXES if name.endswith(s)), None)


def data_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and kind(p))
        if not files:
            raise SourceError(f"--source {path}: no {', '.join(SUFFIXES)} files found in this folder")
        return files
    if not kind(path):
        raise SourceError(f"--source {path}: not a data file (expected one of {', '.join(SUFFIXES)} or a folder)")
    return [path]


# What reading a (possibly gzipped) file raises for its bytes: gzip.BadGzipFile (an OSError), EOFError for a
# truncated stream, zlib.error for corrupt deflate data; an OSError with an errno is the storage's.
READ_ERRORS = (OSError, EOFError, zlib.error)


def _unreadable(f: Path, e: BaseException) -> SourceError:
    """The one-line error of a file whose bytes could not be read (e one of READ_ERRORS)."""
    if isinstance(e, gzip.BadGzipFile):
        return SourceError(f"{f}: not a gzip file ({e})")
    if isinstance(e, zlib.error):
        return SourceError(f"{f}: a corrupt gzip file ({e})")
    if f.name.lower().endswith(".gz") and not (isinstance(e, OSError) and e.errno):  # EOFError: cut short
        return SourceError(f"{f}: not a complete gzip file ({e})")
    return SourceError(f"{f}: cannot read ({getattr(e, 'strerror', None) or e})")


def json_why(e: BaseException) -> str:
    """Why json.loads refused a text, in a few words: its JSONDecodeError, a RecursionError (nested too deeply) or
    the ValueError of an integer past Python's digit limit."""
    if isinstance(e, RecursionError):
        return "nested too deeply"
    if not isinstance(e, json.JSONDecodeError) and "digits" in str(e):
        return f"a number with more than {sys.get_int_max_str_digits()} digits"
    return str(e)


def _open_bytes(path: Path):
    return gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")


def _open_text(path: Path) -> io.TextIOBase:
    return io.TextIOWrapper(_open_bytes(path), encoding="utf-8-sig", newline="")


def _json_lines(f: Path, lines: Iterable[bytes]) -> Iterator[Row]:
    for lineno, raw in enumerate(lines, 1):
        try:
            line = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            yield str(f), lineno, SkipRow("line is not valid UTF-8")
            continue
        if line.strip():
            try:
                yield str(f), lineno, json.loads(line)
            except json.JSONDecodeError:
                yield str(f), lineno, SkipRow("line is not valid JSON")
            except (ValueError, RecursionError) as e:
                yield str(f), lineno, SkipRow(f"line is not valid JSON ({json_why(e)})")


def _read_jsonl(f: Path) -> Iterator[Row]:
    try:
        with _open_bytes(f) as fh:
            yield from _json_lines(f, fh)
    except READ_ERRORS as e:
        raise _unreadable(f, e) from None


def _read_json(f: Path) -> Iterator[Row]:
    try:
        with _open_bytes(f) as fh:
            data = fh.read()
    except READ_ERRORS as e:
        raise _unreadable(f, e) from None
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise SourceError(f"{f}: not valid UTF-8 ({e})") from None
    except json.JSONDecodeError:  # `datasets` writes .json as JSON Lines by default
        yield from _json_lines(f, data.splitlines())
        return
    except (ValueError, RecursionError) as e:
        raise SourceError(f"{f}: not valid JSON ({json_why(e)})") from None
    rows = doc if isinstance(doc, list) else doc.get("data", doc.get("rows", [])) if isinstance(doc, dict) else []
    if not isinstance(rows, list):
        raise SourceError(f"{f}: its data is a JSON {type(rows).__name__}, expected a list of rows")
    for i, row in enumerate(rows, 1):
        yield str(f), i, row


def _read_parquet(f: Path) -> Iterator[Row]:
    import pyarrow.parquet as pq
    n = 0
    try:
        pf = pq.ParquetFile(f)
    except Exception as e:  # pyarrow raises several kinds for a broken file
        raise SourceError(f"{f}: not a readable Parquet file ({type(e).__name__}: {brief(e)})") from None
    for batch in pf.iter_batches(batch_size=1024):  # bounded memory on big shards
        for row in batch.to_pylist():
            n += 1
            yield str(f), n, row


def _read_csv(f: Path) -> Iterator[Row]:
    try:
        with _open_text(f) as fh:
            for i, row in enumerate(csv.DictReader(fh), 1):
                if None in row:  # more cells than header names
                    yield str(f), i, SkipRow("CSV row has more cells than the header")
                    continue
                yield str(f), i, row
    except UnicodeDecodeError as e:
        raise SourceError(f"{f}: not valid UTF-8 ({e})") from None
    except csv.Error as e:
        raise SourceError(f"{f}: not valid CSV ({brief(e)})") from None
    except READ_ERRORS as e:
        raise _unreadable(f, e) from None


READERS = {".jsonl": _read_jsonl, ".jsonl.gz": _read_jsonl, ".json": _read_json, ".json.gz": _read_json,
           ".parquet": _read_parquet, ".csv": _read_csv, ".csv.gz": _read_csv}


def read_local(path: Path) -> Iterator[Row]:
    """(file, row number, row) of every row of a file or of every data file under a folder."""
    for f in data_files(path):
        yield from READERS[kind(f)](f)


def read_hub(hub_id: str, config: str | None, split: str, name: str) -> Iterator[Row]:
    """Rows of a hub dataset through `datasets.load_dataset`; one clear error when it cannot be reached."""
    try:
        import datasets
        ds = datasets.load_dataset(hub_id, config, split=split)
    except Exception as e:  # the hub raises many kinds; all mean "not reachable here"
        raise SourceError(
            f"cannot load {hub_id} ({config or 'default'}, {split}) from the Hugging Face hub ({type(e).__name__}); "
            f"download it and pass --source {name}=PATH (a file or folder), or use --source builtin") from None
    label = f"hub:{hub_id}:{config or 'default'}:{split}"
    for i, row in enumerate(ds, 1):
        yield label, i, row
