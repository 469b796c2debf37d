"""A build's manifest.json: written atomically, read with its well-known keys' types checked, and the builds
under a folder found by it."""

from __future__ import annotations

import json
import time
from pathlib import Path

from sveb.core.manifest import Manifest
from sveb.store.files import StoreError, atomic_write_bytes


def write_manifest(bdir: Path, manifest: dict, *, stamp: bool = True) -> None:
    """stamp=False writes the manifest's own "updated" back (a rerun that changed nothing)."""
    if stamp:
        manifest = {**manifest, "updated": time.strftime("%Y-%m-%dT%H:%M:%S")}
    atomic_write_bytes(bdir / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True).encode())


# The types a manifest's well-known keys must have where present (None: also null): a wrong one is a one-line
# error where it is read, never an AttributeError after scores were written.
MANIFEST_TYPES = {"config": (dict,), "export": (dict,), "fingerprints": (dict,), "truncated": (dict, type(None)),
                  "model": (str,), "domain": (str,), "build_fp": (str,), "status": (str,),
                  "n_problems": (int,), "n_states": (int,), "n_candidates": (int,), "states_from": (dict,)}


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



def load_manifest(bdir: Path) -> Manifest:
    """A build's manifest parsed and typed (sveb.core.manifest.Manifest); read_manifest: the JSON object itself."""
    return Manifest(read_manifest(bdir), Path(bdir) / "manifest.json")
