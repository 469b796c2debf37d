"""Running `sveb` in-process and checking what a refusal looks like: one `error:` line, nothing written."""

import json

from typer.testing import CliRunner


def cli(*args, **kw):
    from sveb.cli import app
    return CliRunner().invoke(app, [str(a) for a in args], **kw)


def one_line_error(r, *fragments):
    """exit 1, one `error:` line holding every fragment, no traceback."""
    lines = [x for x in r.output.strip().splitlines() if x.strip()]
    assert r.exit_code == 1, r.output
    errors = [x for x in lines if x.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], r.output  # progress lines may come before it
    text = errors[0]
    for f in fragments:
        assert f in text, (f, r.output)
    assert "Traceback" not in r.output and "Aborted" not in r.output
    return text


def files_of(folder):
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def edit_manifest(ex, fn):
    m = json.loads((ex / "manifest.json").read_text())
    m = fn(m)
    (ex / "manifest.json").write_text(json.dumps(m))


def forge_table(ex, table, fn):
    """Edit a table's rows and rewrite its hashes in the manifest: an export consistent with itself."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sveb import store
    path = next((ex / table).glob("part-*.parquet"))
    t = pq.read_table(path)
    pq.write_table(pa.Table.from_pylist(fn(t.to_pylist()), schema=t.schema), path)
    m = json.loads((ex / "manifest.json").read_text())
    m["export"]["tables"][table]["sha256"] = store.table_hash(ex / table)
    m["export"]["content_hash"] = store.content_hash(ex)
    (ex / "manifest.json").write_text(json.dumps(m))


def refused(ex, *fragments, args=()):
    """`sveb eval` on an export refused with one line holding every fragment, the export left byte for byte."""
    before = files_of(ex)
    text = one_line_error(cli("eval", "--build", ex, "-e", "grpo", *args), *fragments)
    assert files_of(ex) == before  # nothing written before every check passed
    return text
