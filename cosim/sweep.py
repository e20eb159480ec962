"""Many runs of one spec: parameter grids, Monte Carlo / Latin-hypercube samples and
lists of spec files, mapped over Dask distributed (ANCHORS "Scale-out"; FMPy's
parameter-variation example maps FMU runs over Dask the same way).

* :mod:`cosim.variations`: the list of changes, one mapping ``{name: value}`` per run,
  in a fixed order (grids, Latin-hypercube / random samples with a recorded seed).
* Each run is ``cosim.run(spec.with_parameter(...))`` in a worker process: the same
  function a serial run calls, so a run of a sweep equals the same spec run alone,
  bit for bit.  A failed run is recorded with its error and does not stop the others.
  Results are gathered by run index, so the files' row order never depends on which
  worker finished first, and a run lost with a worker is rescheduled by Dask and
  still appears exactly once.
* No client / scheduler: an embedded ``LocalCluster`` on 127.0.0.1 (one worker
  process per core, one thread and one BLAS/OpenMP thread each).  A scheduler
  address (``tcp://host:port``) or a scheduler file: an existing cluster (``dask
  scheduler`` + ``dask worker``); an address that does not answer is an error
  within ``timeout`` seconds.
* Results: :meth:`SweepResult.write` -> ``runs.parquet`` (run x parameters x
  metrics, status, error) and ``timeseries.parquet`` (run x time x signals), via
  pyarrow, with the sweep's description (spec, variations, seed) in the file
  metadata; no wall times in the files, so a rerun with the same seed writes the
  same bytes.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import numpy as np

from .errors import CosimError
from .variations import (Variations, make_variations, parse_distribution, parse_range, sample,  # noqa: F401
                         specs_for)

WORKER_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class ClusterError(CosimError):
    """The Dask scheduler cannot be reached or the cluster cannot start."""


def require_sweep_extra(what="cosim.sweep"):
    """dask, distributed and pyarrow are importable, else a one-line
    :class:`~cosim.errors.MissingExtraError` naming the ``sweep`` extra."""
    from .extras import require
    for module in ("dask", "distributed", "pyarrow"):
        require(module, what, "sweep")


# -- running ---------------------------------------------------------------------------------
@dataclass
class RunFailure:
    """A run that raised: its index and the error, one line."""
    index: int
    error: str


def run_one(spec_dict):
    """One run in a worker: plain spec data in, a RunResult or a RunFailure out."""
    from .run import run
    from .spec import SimulationSpec
    spec_dict = dict(spec_dict)  # a retried task (lost worker) gets the same argument again
    index = spec_dict.pop("__index__", -1)
    try:
        return run(SimulationSpec.from_dict(spec_dict, source=f"run {index}"))
    except Exception as exc:  # recorded, never stops the sweep
        return RunFailure(index, f"{type(exc).__name__}: {' '.join(str(exc).split())}")


@dataclass
class SweepResult:
    specs: list
    variations: Variations
    results: list                 # RunResult or RunFailure, in run order
    wall_time_s: float = 0.0
    cluster: str = ""

    @property
    def failures(self):
        return [r for r in self.results if isinstance(r, RunFailure)]

    def metric_names(self):
        for r in self.results:
            if not isinstance(r, RunFailure):
                return list(r.metrics) or [f"final:{n}" for n in r.plant_output_names]
        return [m.name for m in self.specs[0].metrics] if self.specs else []

    def _metrics_of(self, r):
        if r.metrics:
            return r.metrics
        return {f"final:{n}": float(v) for n, v in zip(r.output_names, r.outputs[-1])
                if n in r.plant_output_names}

    def runs_table(self):
        """pyarrow Table: run, one column per varied quantity, status, error, metrics, steps."""
        require_sweep_extra("SweepResult.runs_table")
        import pyarrow as pa
        metrics = self.metric_names()
        cols = {"run": pa.array(range(len(self.results)), pa.int64())}
        for name in self.variations.names:
            cols[name] = pa.array([dict(v).get(name) for v in self.variations.runs], pa.float64())
        if self.variations.kind == "specs":
            cols["spec"] = pa.array(self.variations.description["specs"], pa.string())
        cols["status"] = pa.array(["failed" if isinstance(r, RunFailure) else "ok" for r in self.results])
        cols["error"] = pa.array([r.error if isinstance(r, RunFailure) else None for r in self.results],
                                 pa.string())
        for m in metrics:
            cols[m] = pa.array([math.nan if isinstance(r, RunFailure) else self._metrics_of(r).get(m, math.nan)
                                for r in self.results], pa.float64())
        cols["steps"] = pa.array([None if isinstance(r, RunFailure) else int(r.stats["steps"])
                                  for r in self.results], pa.int64())
        return pa.table(cols, metadata={b"cosim.sweep": self._description()})

    def timeseries_table(self):
        """pyarrow Table in long form: run, time, one column per recorded signal."""
        require_sweep_extra("SweepResult.timeseries_table")
        import pyarrow as pa
        ok = [(i, r) for i, r in enumerate(self.results) if not isinstance(r, RunFailure)]
        if not ok:
            return pa.table({"run": pa.array([], pa.int64()), "time": pa.array([], pa.float64())})
        names = list(self._signals(ok[0][1]))
        runs, times, data = [], [], {n: [] for n in names}
        for i, r in ok:
            sig = self._signals(r)
            runs.append(np.full(len(r.time), i, dtype=np.int64))
            times.append(r.time)
            for n in names:
                data[n].append(sig.get(n, np.full(len(r.time), np.nan)))
        cols = {"run": pa.array(np.concatenate(runs)), "time": pa.array(np.concatenate(times))}
        for n in names:
            cols[n] = pa.array(np.concatenate(data[n]))
        return pa.table(cols, metadata={b"cosim.sweep": self._description()})

    @staticmethod
    def _signals(r):
        if r.spec.record_signals is not None:
            return r.recorded()
        return {n: r.outputs[:, j] for j, n in enumerate(r.output_names)}

    def _description(self):
        return json.dumps({"spec": self.specs[0].to_dict() if self.specs else None,
                           "variations": self.variations.description, "kind": self.variations.kind,
                           "seed": self.variations.seed, "runs": len(self.results)}, sort_keys=True)

    def write(self, folder):
        """``folder/runs.parquet`` and ``folder/timeseries.parquet``; returns their paths."""
        import pyarrow.parquet as pq
        os.makedirs(folder, exist_ok=True)
        paths = (os.path.join(folder, "runs.parquet"), os.path.join(folder, "timeseries.parquet"))
        pq.write_table(self.runs_table(), paths[0])
        pq.write_table(self.timeseries_table(), paths[1])
        return paths

    def summary_lines(self):
        n, failed = len(self.results), len(self.failures)
        lines = [f"sweep: {n} runs ({self.variations.kind}), {n - failed} ok, {failed} failed, "
                 f"wall {self.wall_time_s:.2f} s ({n / self.wall_time_s if self.wall_time_s else 0:.3g} runs/s)"
                 f"  on {self.cluster}"]
        if self.variations.seed is not None:
            lines.append(f"  seed {self.variations.seed} ({self.variations.description.get('sampling')})")
        table = self.runs_table()
        for name in [*self.variations.names, *self.metric_names()]:
            x = np.array(table.column(name).to_pylist(), dtype=float)
            x = x[np.isfinite(x)]
            if x.size:
                lines.append(f"  {name:>28s}  min {x.min(): .6g}  mean {x.mean(): .6g}  max {x.max(): .6g}")
        for f in self.failures[:5]:
            lines.append(f"  run {f.index} failed: {f.error[:160]}")
        if failed > 5:
            lines.append(f"  ... {failed - 5} more failures in runs.parquet (column error)")
        return lines


def _check_main_guard():
    """An embedded cluster starts worker processes that import the main script again:
    called from a script's top level (no ``if __name__ == "__main__":``), every worker
    would run the script's body.  Refuse in one line before starting any process."""
    import sys
    main = sys.modules.get("__main__")
    if main is None or not getattr(main, "__file__", None):
        return  # interactive, python -c, a notebook: nothing is imported again
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name.endswith("__main__"):
        return  # python -m package: multiprocessing does not import package.__main__ again
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is vars(main) and \
                not _under_main_guard(main.__file__, frame.f_lineno):
            raise ClusterError(
                "cosim.sweep starts worker processes that import your script again: put the "
                "call under `if __name__ == \"__main__\":` (or pass client=/scheduler= to use "
                "a running cluster)")
        frame = frame.f_back


def _under_main_guard(path, line):
    """Line ``line`` of the script ``path`` is inside ``if __name__ == "__main__":``
    (True when the file cannot be read or parsed: then nothing is refused)."""
    import ast
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and \
                "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test):
            first, last = node.body[0].lineno, max(getattr(n, "end_lineno", n.lineno) for n in node.body)
            if first <= line <= last:
                return True
    return False


def connect(scheduler=None, workers=None, timeout=10.0):
    """(client, description, close): an existing cluster (address or scheduler file),
    else an embedded LocalCluster on 127.0.0.1 with one single-threaded worker
    process per core (``workers`` to choose) and one BLAS/OpenMP thread each."""
    import logging

    require_sweep_extra("cosim.sweep.connect")
    import dask
    from distributed import Client, LocalCluster
    if scheduler:
        is_file = os.path.isfile(scheduler) or scheduler.endswith(".json")
        try:
            if is_file:
                client = Client(scheduler_file=scheduler, timeout=f"{timeout}s")
            else:
                client = Client(scheduler, timeout=f"{timeout}s")
        except (OSError, TimeoutError, ValueError) as exc:
            what = "scheduler file" if is_file else "scheduler"
            raise ClusterError(f"{what} {scheduler!r} does not answer within {timeout:g} s "
                               f"({type(exc).__name__}: {' '.join(str(exc).split())[:160]})") from None
        return client, f"cluster {client.scheduler.address}", client.close
    _check_main_guard()
    n = workers or os.cpu_count() or 1
    with dask.config.set({"distributed.nanny.pre-spawn-environ": dict(
            dask.config.get("distributed.nanny.pre-spawn-environ", {}), **WORKER_ENV)}):
        try:
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
        except Exception as exc:
            raise ClusterError(f"cannot start a local Dask cluster: {exc}") from None
    client = Client(cluster)

    def close():
        client.close()
        cluster.close()
    return client, f"embedded LocalCluster ({n} worker processes x 1 thread)", close


def sweep(spec, variations=None, client=None, *, scheduler=None, workers=None, timeout=10.0,
          progress=None, specs=None, labels=None):
    """Run ``spec`` once per variation (or each spec of ``specs``, named by ``labels`` in
    the files, default their names) on Dask; returns a :class:`SweepResult` in run order.
    ``client``: a ``distributed.Client`` to use; else ``scheduler`` (address or scheduler
    file) or an embedded LocalCluster.  ``progress``: None (default) draws a bar on
    stderr when it is a terminal and the sweep takes longer than 2 s, True always, False
    never, or a callable ``progress(done, total)`` called as runs finish
    (:mod:`cosim.progress`)."""
    import time

    require_sweep_extra("cosim.sweep")
    from distributed import as_completed
    if specs is None:
        variations = variations if variations is not None else Variations(runs=((),), names=())
        specs = specs_for(spec, variations)
    else:
        variations = Variations(runs=tuple(() for _ in specs), names=(), kind="specs",
                                description={"specs": list(labels or [s.name for s in specs])})
    from .progress import progress_callback
    progress, close_progress = progress_callback(progress, 0, len(specs), unit="", label="runs")
    close = None
    if client is None:
        client, where, close = connect(scheduler, workers, timeout)
    else:
        where = f"client {client.scheduler.address}"
    try:
        wall0 = time.perf_counter()
        payload = [dict(s.to_dict(), __index__=i) for i, s in enumerate(specs)]
        futures = client.map(run_one, payload, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        results = [None] * len(futures)
        done = 0
        for fut in as_completed(futures):
            i = index[fut.key]
            try:
                results[i] = fut.result()
            except Exception as exc:  # e.g. the task was lost more often than allowed
                results[i] = RunFailure(i, f"{type(exc).__name__}: {' '.join(str(exc).split())}")
            done += 1
            if progress is not None:
                progress(done, len(futures))
        wall = time.perf_counter() - wall0
    finally:
        close_progress()
        if close is not None:
            close()
    for i, r in enumerate(results):
        if isinstance(r, RunFailure):
            r.index = i
    return SweepResult(specs=specs, variations=variations, results=results, wall_time_s=wall, cluster=where)


def write_plot(path, result):
    """Every run's first recorded signal against time coloured by the first varied
    quantity (a colour bar with its unit), and each metric against each varied quantity
    (:func:`cosim.plotting.write_sweep_plot`).  Returns False (nothing written) without
    matplotlib."""
    import importlib.util
    if importlib.util.find_spec("matplotlib") is None:
        return False
    from .plotting import write_sweep_plot
    write_sweep_plot(path, result)
    return True


__all__ = ["ClusterError", "RunFailure", "SweepResult", "Variations", "connect", "make_variations",
           "parse_distribution", "parse_range", "run_one", "sample", "specs_for", "sweep", "write_plot"]
