"""What one short run pays once: making the integrator, and ``initialize``
(of which the initial-condition analysis, ``cosim/ic.py``, seed 000
Algorithm 1), against the whole run (issue 13, the peers benchmark times
``make_integrator`` + ``initialize`` + ``advance``).

Thread CPU time, the minimum over ``--runs`` runs in one process (the
machine may be shared: CPU time is not inflated by waiting for a core, the
minimum drops the runs a neighbour slowed down); the compiled entry is loaded
before anything is timed; small factorisations single-threaded.

    python benchmarks/setup_cost.py [--model andrews] [--method bdf] [--rtol 1e-4]
                                    [--atol 1e-8] [--t-end 0.03] [--runs 40]
"""
import argparse
import os
import sys
import time

from cosim.blas import single_threaded
from cosim.integrators import base, make_integrator
from cosim.models import load_model


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="andrews")
    ap.add_argument("--method", default="bdf")
    ap.add_argument("--backend", default="numba")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-8)
    ap.add_argument("--t-end", type=float, default=0.03)
    ap.add_argument("--runs", type=int, default=40)
    args = ap.parse_args(argv)
    clock = time.thread_time
    ic_times = []
    owner = next(c for c in vars(base).values() if isinstance(c, type) and "_ic" in vars(c))
    plain_ic = owner._ic

    def timed_ic(self, *a, **k):  # the IC analysis inside initialize, timed separately
        c = clock()
        try:
            return plain_ic(self, *a, **k)
        finally:
            ic_times.append(clock() - c)

    owner._ic = timed_ic
    rows = []
    with single_threaded():
        for k in range(args.runs + 1):
            model = load_model(args.model)
            c0 = clock()
            integ = make_integrator(model, args.method, rtol=args.rtol, atol=args.atol,
                                    backend=args.backend)
            c1 = clock()
            integ.initialize()
            c2 = clock()
            integ.advance(args.t_end)
            c3 = clock()
            if k:  # the first run loads the compiled entry
                rows.append((c1 - c0, c2 - c1, ic_times[-1] if ic_times else 0.0, c3 - c2, c3 - c0))
    owner._ic = plain_ic
    best = [min(r[j] for r in rows) * 1e3 for j in range(5)]
    print(f"{args.model} / {args.method} ({args.backend}), rtol {args.rtol:g}, atol {args.atol:g}, "
          f"[0, {args.t_end:g}], {integ.stats['steps']} steps; thread CPU ms, min of {args.runs} runs; "
          f"load {os.getloadavg()[0]:.2f}")
    for label, value in zip(("make_integrator", "initialize", "  of which IC analysis",
                             "advance", "whole run"), best):
        print(f"  {label:24s} {value:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
