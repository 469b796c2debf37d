"""A build's manifest.json: written atomically, read with its well-known keys' types checked, and the builds
under a folder found by it."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Mapping
from pathlib import Path

from sveb.store.files import StoreError, atomic_write_bytes


def write_manifest(bdir: Path, manifest: dict) -> None:
    manifest = {**manifest, "updated": time.strftime("%Y-%m-%dT%H:%M:%S")}
    atomic_write_bytes(bdir / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True).encode())


# The types a manifest's well-known keys must have where present (None: also null): a wrong one is a one-line
# error where it is read, never an AttributeError after scores were written.
MANIFEST_TYPES = {"config": (dict,), "export": (dict,), "fingerprints": (dict,), "truncated": (dict, type(None)),
                  "model": (str,), "domain": (str,), "build_fp": (str,), "status": (str,),
                  "n_problems": (int,), "n_states": (int,), "n_candidates": (int,)}


def read_manifest(bdir: Path) -> dict:
    path = Path(bdir) / "manifest.json"
    try:
        m = json.loads(path.read_text())
    except FileNotFoundError:
        raise StoreError(f"{bdir}: no manifest.json (not a build directory)") from None
    except IsADirectoryError:
        raise StoreError(f"{path}: is a folder, not a manifest file") from None
    except json.JSONDecodeError as e:
        raise StoreError(f"{path}: corrupt manifest ({e.msg})") from None
    except UnicodeDecodeError:
        raise StoreError(f"{path}: corrupt manifest (not UTF-8 text)") from None
    except ValueError as e:  # after JSONDecodeError and UnicodeDecodeError, its subclasses: a too long int
        from sveb.data_builders.files import json_why
        raise StoreError(f"{path}: corrupt manifest ({json_why(e)})") from None
    except RecursionError:
        raise StoreError(f"{path}: corrupt manifest (nested too deeply)") from None
    except OSError as e:
        raise StoreError(f"{path}: unreadable ({e.strerror or type(e).__name__})") from None
    if not isinstance(m, dict):
        raise StoreError(f"{path}: malformed manifest (a JSON {type(m).__name__}, expected an object)")
    for key, types in MANIFEST_TYPES.items():
        v = m.get(key)
        if key in m and (not isinstance(v, types) or (int in types and (isinstance(v, bool) or v < 0))):
            want = "an object" if dict in types else "a whole number >= 0" if int in types else "a string"
            raise StoreError(f"{path}: malformed manifest ({key} is {json.dumps(v)[:40]}, expected {want})")
    return m


def complete(bdir: Path) -> bool:
    """Whether the build's manifest says every stage finished."""
    return read_manifest(bdir).get("status") == "complete"


def list_builds(root: str | Path) -> list[Path]:
    """Every build directory under root (those holding a manifest.json, up to 3 levels down: `sveb build`'s
    <model>/<domain>/<fp>, or exports anywhere above that), oldest first; a root that is itself a build (e.g. an
    export folder) is that one build."""
    if (Path(root) / "manifest.json").exists():
        return [Path(root)]
    found = [p.parent for pattern in ("*/manifest.json", "*/*/manifest.json", "*/*/*/manifest.json")
             for p in Path(root).glob(pattern)]
    return sorted(found, key=lambda p: (p / "manifest.json").stat().st_mtime)


class Manifest(Mapping):
    """A build's manifest, parsed once: its well-known keys as typed attributes (what the code reads), every key
    still readable by name (a Mapping: plugins' `manifest["model"]` and BuildConfig.from_manifest keep working).
    `path`: the manifest.json it was read from, for one-line errors."""

    def __init__(self, raw: dict, path: Path | None = None):
        self.raw, self.path = raw, path
        self.model: str | None = raw.get("model")
        self.domain: str | None = raw.get("domain")
        self.build_fp: str | None = raw.get("build_fp")
        self.status: str | None = raw.get("status")
        self.n_problems: int | None = raw.get("n_problems")
        self.n_states: int | None = raw.get("n_states")
        self.n_candidates: int | None = raw.get("n_candidates")
        self.export: dict | None = raw.get("export")  # an export's tables, hashes and weights hash
        self.fingerprints: dict = raw.get("fingerprints") or {}
        self.truncated: dict = raw.get("truncated") or {}  # share cut off by the token budget, per table
        self.recorded_config: dict = raw.get("config") if isinstance(raw.get("config"), dict) else {}
        self.seconds: float | None = raw.get("seconds")
        self.dtype: str | None = raw.get("dtype")
        self.gpu = raw.get("gpu")
        self.cpu_flags: str = str(raw.get("cpu_flags") or "")
        self.versions: dict = raw.get("versions") if isinstance(raw.get("versions"), dict) else {}
        self.candidate_accuracy: dict = raw.get("candidate_accuracy") or {}
        self.skipped_rows: dict = raw.get("skipped_rows", {})

    @classmethod
    def read(cls, bdir: Path) -> Manifest:
        return cls(read_manifest(bdir), Path(bdir) / "manifest.json")

    @classmethod
    def of(cls, manifest: Manifest | dict) -> Manifest:
        """A Manifest as given, or one over a manifest's parsed JSON (older callers hand a dict)."""
        return manifest if isinstance(manifest, Manifest) else cls(manifest)

    @functools.cached_property
    def config(self):
        """The build's config, typed (BuildConfig.from_manifest: a missing key takes its default)."""
        from sveb.core.config import BuildConfig
        return BuildConfig.from_manifest(self.raw)

    @property
    def seed(self) -> int | None:
        """The build's seed as recorded, typed; None where none is (an imported build's null or missing seed is
        unknown, not BuildConfig's default 0)."""
        return None if self.recorded_config.get("seed") is None else self.config.seed

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @property
    def is_export(self) -> bool:
        return "export" in self.raw

    @property
    def export_format(self) -> str | None:
        return (self.export or {}).get("format")

    @property
    def content_hash(self) -> str | None:
        """An export's content hash (None for a build made here: computed from its tables)."""
        return (self.export or {}).get("content_hash")

    @property
    def weights_sha256(self) -> str | None:
        """The weights an export was sampled with (None: a build made here, or imported text)."""
        return (self.export or {}).get("model_weights_sha256")

    def headline(self) -> dict:
        """The fields `sveb ls builds` and the describe line show."""
        return {k: self.raw.get(k) for k in ("model", "domain", "build_fp", "status", "n_problems", "n_states",
                                             "truncated")}

    def __getitem__(self, key: str):
        return self.raw[key]

    def __iter__(self):
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __repr__(self) -> str:
        return f"Manifest({self.path or self.build_fp})"
