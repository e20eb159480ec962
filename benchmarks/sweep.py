"""Throughput of ``cosim.sweep`` on Dask against a serial loop (issue 17).

N runs of the shipped ``pendulum_pd`` scenario (ideal pendulum, generalized-α, PD at
1 ms and a supervisor at 2.5 ms) cut to ``--stop-time`` seconds, for N rod lengths:

* serial: ``cosim.run`` in a bare loop in this process (one BLAS thread, as a worker);
* Dask, 1 and 2 worker processes (embedded LocalCluster on 127.0.0.1, one thread
  and one BLAS thread each), each worker warmed first (imports, compiled kernels);
* parallel efficiency = runs/s with 2 workers / (2 x serial runs/s);
* per-run overhead of Dask = (wall with 1 worker - serial wall) / N, and the cost
  of an empty task (``client.map`` of a no-op, gathered) against a bare call.

Every sweep run is checked equal (final state bytes) to its serial run.  Wall times
on a shared 2-core machine vary by tens of percent between invocations.

    python benchmarks/sweep.py [--runs N] [--stop-time T] [--quick]
"""
import argparse
import os
import time

# the serial loop gets the workers' one BLAS/OpenMP thread (set before numpy loads),
# so the comparison is of the same work
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import cosim  # noqa: E402
from cosim.sweep import connect, make_variations, specs_for, sweep  # noqa: E402


def noop(x):
    return x


def warm(client, spec):
    """Import cosim and load the compiled kernels in every worker."""
    from cosim.sweep import run_one
    client.run(run_one, dict(spec.to_dict(), __index__=0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--stop-time", type=float, default=1.0)
    ap.add_argument("--quick", action="store_true", help="20 runs of 0.5 s")
    args = ap.parse_args()
    n, stop = (20, 0.5) if args.quick else (args.runs, args.stop_time)
    spec = cosim.load_spec("pendulum_pd").replace(stop_time=stop)
    variations = make_variations(spec, [f"l=0.5:2.0:{n}"])
    specs = specs_for(spec, variations)
    cosim.run(specs[0])  # warm this process too
    t0 = time.perf_counter()
    serial = [cosim.run(s) for s in specs]
    wall_serial = time.perf_counter() - t0
    steps = sum(r.stats["steps"] for r in serial) / n

    rows = [("serial loop", 1, wall_serial)]
    empty = {}
    for workers in (1, 2):
        client, _, close = connect(workers=workers)
        try:
            warm(client, spec)
            result = sweep(spec, variations, client=client)
            assert not result.failures, result.failures[:1]
            assert all(a.final_state == b.final_state for a, b in zip(result.results, serial))
            rows.append((f"dask, {workers} worker{'s' if workers > 1 else ''}", workers, result.wall_time_s))
            if workers == 1:
                client.gather(client.map(noop, range(10), pure=False))
                t0 = time.perf_counter()
                client.gather(client.map(noop, range(200), pure=False))
                empty["task"] = (time.perf_counter() - t0) / 200
        finally:
            close()
    t0 = time.perf_counter()
    for i in range(200):
        noop(i)
    empty["call"] = (time.perf_counter() - t0) / 200

    print(f"cosim sweep: {n} runs of pendulum_pd to {stop:g} s ({steps:.0f} integrator steps "
          f"per run, backend {serial[0].backend})")
    print(f"{'':>18s} {'wall [s]':>9s} {'runs/s':>8s} {'speed-up':>9s} {'efficiency':>11s}")
    for name, workers, wall in rows:
        rate = n / wall
        speedup = wall_serial / wall
        print(f"{name:>18s} {wall:9.2f} {rate:8.2f} {speedup:9.2f} {speedup / workers:11.0%}")
    per_run = (rows[1][2] - wall_serial) / n
    print(f"per-run overhead of Dask (1 worker vs the bare loop): {1e3 * per_run:.1f} ms "
          f"({100 * per_run / (wall_serial / n):.0f} % of a {1e3 * wall_serial / n:.0f} ms run)")
    print(f"empty task through Dask: {1e3 * empty['task']:.2f} ms; bare call: "
          f"{1e6 * empty['call']:.2f} µs")


if __name__ == "__main__":
    main()
