"""A build's manifest as a typed record (`Manifest`): what sveb.store parses from manifest.json and hands on with a
build (sveb.store.Build), read by attribute (`manifest.model`, `manifest.truncated`, `manifest.config`) rather than
by key; its keys' types are checked where it is parsed (sveb.store.manifest.read_manifest)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

from sveb.core.config import BuildConfig


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
        # a re-reference (sveb.sample.rereference): the build whose problems, rollouts and states it holds
        self.states_from: dict | None = raw.get("states_from")

    @classmethod
    def of(cls, manifest: Manifest | dict) -> Manifest:
        """A Manifest as given, or one over a manifest's parsed JSON (older callers hand a dict)."""
        return manifest if isinstance(manifest, Manifest) else cls(manifest)

    @functools.cached_property
    def config(self):
        """The build's config, typed (BuildConfig.from_manifest: a missing key takes its default)."""
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
        out = {k: self.raw.get(k) for k in ("model", "domain", "build_fp", "status", "n_problems", "n_states",
                                            "truncated")}
        if self.states_from:  # its rollouts are another model's: said wherever the build is listed
            out["states_from"] = {k: self.states_from.get(k) for k in ("model", "build_fp")}
        return out

    def __getitem__(self, key: str):
        return self.raw[key]

    def __iter__(self):
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __repr__(self) -> str:
        return f"Manifest({self.path or self.build_fp})"
