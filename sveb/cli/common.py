"""What every `sveb` command module shares: the Typer app, consoles, common options, error printing.

Every command runs inside one handler (SvebGroup.invoke): SVEB's own errors end in one line and exit 1, Ctrl-C or
SIGTERM in one line and exit 130; anything else is a bug and shows its traceback. Commands just raise."""

from __future__ import annotations

import typer
from rich.console import Console


class SvebGroup(typer.core.TyperGroup):
    """The one handler round every command, for `sveb` and for CliRunner alike (both invoke the group)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except _known() as e:
            _fail(e)
        except OSError as e:  # storage refused a write (read-only, full, not ours): one line naming the path
            if e.errno not in _storage_errnos():
                raise
            _fail(Exception(_storage_message(e)))
        except KeyboardInterrupt:  # procs turns the first SIGINT/SIGTERM into this
            _interrupted()


app = typer.Typer(cls=SvebGroup, add_completion=False, no_args_is_help=True,
                  help="SVEB: how accurately does a state-value estimator predict V(s), the expected final reward "
                       "given the prefix s?")
console = Console(stderr=True)
out = Console()


def _version(value: bool) -> None:
    if value:
        from sveb import __version__
        out.print(f"sveb {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print SVEB's version and exit.")) -> None:
    """SVEB: how accurately does a state-value estimator predict V(s), the expected final reward given the prefix s?"""

ROOT = typer.Option("sveb_data", "--root", help="Where builds are stored.")
MODEL = typer.Option("smollm2-135m", "--model",
                     help="Builtin alias, local model directory, hub id, or short name (`sveb ls models`).")
DOMAIN = typer.Option("number", "--domain", help="A declared domain (`sveb ls domains`).")


def loads_model(entry) -> bool:
    """Whether an estimator loads a model when it runs (a minute or more on a CPU): it reads hidden states or
    trains on the policy model, or runs a model itself (judge, prm, logprob), as its class declares (`sveb ls
    estimators` says so)."""
    return bool(entry.needs_hidden or entry.needs_training or entry.loads_model)


def announce_loads(names: list[str], model: str) -> None:
    """One line before `sveb eval` runs estimators that load a model, so a pause is not taken for a hang."""
    from sveb.estimators import entry
    loading = [n for n in names if loads_model(entry(n))]
    if loading:
        console.print(f"[dim]{', '.join(loading)}: load{'s' * (len(loading) == 1)} the model {model} (hidden states or "
                      f"training; cached ones are reused)[/]", soft_wrap=True)


def _fail(e: Exception) -> None:
    from rich.markup import escape
    console.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True)  # one line, brackets in paths kept
    raise typer.Exit(1)


def _interrupted() -> None:
    console.print("[yellow]interrupted: every finished shard is kept; rerun the same command to resume[/]")
    raise typer.Exit(130)


def _storage_errnos() -> set:
    import errno
    return {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR, errno.EISDIR}


def _storage_message(e: OSError) -> str:
    """`cannot write PATH: Read-only file system` from an OSError, whoever raised it (Python, pyarrow, shutil)."""
    import errno
    path = e.filename if e.filename is not None else (str(e).splitlines()[0] if str(e) else "?")
    what = "cannot write" if e.errno in (errno.EROFS, errno.ENOSPC, errno.EDQUOT) else "cannot use"
    return f"{what} {path}: {e.strerror or type(e).__name__}"


def _known() -> type:
    """What the CLI reports in one line: SVEB's own errors. Anything else is a bug and shows its traceback."""
    from sveb.core.errors import SvebError
    return SvebError


class OptionalRayValue(typer.core.TyperCommand):
    """`--ray` may come without an address: a local cluster (click's optional values are not in Typer)."""

    def parse_args(self, ctx, args):
        args = list(args)
        for i, a in enumerate(args):
            if a == "--ray" and (i + 1 == len(args) or args[i + 1].startswith("-")):
                args.insert(i + 1, "local")
                break
        return super().parse_args(ctx, args)


RAY = typer.Option(None, "--ray", metavar="[ADDRESS]", help="Run on a Ray cluster: no value starts a local one, "
                   "`auto` joins the running one (`ray start --head`), or host:port / ray://host:10001. --root "
                   "must be a path every node sees. Needs `pip install 'sveb\\[ray]'`.")
WORKERS = typer.Option(None, "--workers", help="Without --ray: parallel reward workers (default 4). With --ray: "
                       "Ray actors, each with its own engine (default: one per --gpus-per-worker GPUs, else 1).")

EXPECT = typer.Option(None, "--expect", metavar="HASH", help="Refuse the build unless its content hash (as `sveb "
                      "export` and the dataset card state it; 8+ leading hex characters) is HASH.")

BUILD_DIR = typer.Option(None, "--build", help="One build or export folder (or hub:ID) instead of every build under "
                         "ROOT.")


def build_root(root, build):
    """A --build folder (or hub:ID) stands in for ROOT: the store lists a root that is itself a build."""
    if build is None:
        return root
    from sveb.store.builds import open_build, results_view
    return results_view(open_build(build, root), create=False)  # a read-only export's scores are in its mirror


SEEDS = typer.Option(None, "--seeds", help="Build seeds, e.g. 0,1,2: one independent build per seed (instead of "
                     "--seed); reports and the leaderboard pool them.")
ALLOW_MIXED_DTYPE = typer.Option(False, "--allow-mixed-dtype", help="Pool builds sampled, or estimates computed, "
                                 "in different dtypes (refused by default); each such table says so.")
ALLOW_UNEQUAL_SEEDS = typer.Option(False, "--allow-unequal-seeds", help="Pool seeds whose level or answer-type "
                                   "mix differs (p < 0.01; refused by default); each such table says so.")


def parse_seeds(seeds: str | None, default: int) -> list[int]:
    """`--seeds 0,1,2` -> [0, 1, 2] (distinct, each >= 0); without it, [default]."""
    from sveb.core.errors import UsageError
    if seeds is None:
        return [default]
    try:
        out = [int(x) for x in seeds.replace(" ", ",").split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--seeds {seeds}: expected comma-separated integers, e.g. 0,1,2") from None
    if not out or min(out) < 0 or len(set(out)) != len(out):
        raise UsageError(f"--seeds {seeds}: expected distinct integers >= 0, e.g. 0,1,2")
    return out
