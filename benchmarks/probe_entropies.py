"""The probe's next-token entropies on a real build: at every response position (as before 2026-11-27) vs only
at the positions its states read (the `window` tokens up to each state's t, in the state's own rollout and its
group's others). Why scoring one more seed no longer pays the LM head at every position (docs/timings.md).

    python benchmarks/probe_entropies.py --build sveb_data/smollm2-135m/programming/<fp>
    python benchmarks/probe_entropies.py --build DIR --problems 10 --window 8

Reads the build's shared hidden pass (it must have been scored once: the pass is cached in the build) and
times `entropies` on the same final-layer rows both ways, with the CPU flags; writes nothing."""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", required=True, type=Path)
    p.add_argument("--problems", type=int, default=0, help="the first N problems (0: all)")
    p.add_argument("--window", type=int, default=8)
    a = p.parse_args(argv)
    import numpy as np
    import torch

    from sveb.core.device import cpu_flags
    from sveb.estimators.probe_features import Tracks, entropies, read_positions
    from sveb.lm.hidden import HiddenStates
    from sveb.store.builds import load_build
    data = load_build(a.build)
    model = data.manifest["model"]
    hs = HiddenStates(a.build, model)
    tracks = Tracks(hs, model, -1, a.window)
    flags = " ".join(sorted(f for f in cpu_flags() if f.startswith(("avx512", "amx")))) or "no avx512/amx"
    print(f"CPU flags: {flags}; torch threads {torch.get_num_threads()}; pass dtype {hs.dtype}")
    pids = sorted(data.problems)[: a.problems or None]
    took = {"every position": 0.0, "read positions": 0.0}
    rows = {"every position": 0, "read positions": 0}
    for pid in pids:
        final = tracks._final(pid, data.rollouts[pid])
        ts = {s["t"] for s in data.states if s["problem_id"] == pid}
        need = read_positions({i: len(f) for i, f in final.items()}, ts, a.window)
        for what, x in (("every position", np.concatenate(list(final.values()))),
                        ("read positions", np.concatenate([final[i][need[i]] for i in final]))):
            t0 = time.perf_counter()
            entropies(x, tracks._head)
            took[what] += time.perf_counter() - t0
            rows[what] += len(x)
    for what in took:
        print(f"{what:>15}: {rows[what]:>8} positions, {took[what]:7.1f} s")
    print(f"{len(pids)} problems, {len(data.states)} states; read/every: positions "
          f"{rows['read positions'] / rows['every position']:.3f}, seconds "
          f"{took['read positions'] / took['every position']:.3f}")


if __name__ == "__main__":
    main()
