"""Many runs of one spec: parameter grids, Monte Carlo / Latin-hypercube samples and
lists of spec files, mapped over Dask distributed (ANCHORS "Scale-out"; FMPy's
parameter-variation example maps FMU runs over Dask the same way).

* ``Variations``: the list of changes, one mapping ``{name: value}`` per run, in a
  fixed order (grid points in row-major order of the ``--grid`` options, then the
  samples); ``name`` is a model parameter (``l``), ``params.l``, a top-level number
  (``rtol``, ``stop_time``...) or a block's value (``blocks.pd.kp``).
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

import itertools
import json
import math
import os
import re
import secrets
from dataclasses import dataclass, field

import numpy as np

from .errors import CosimError, SpecError

DISTRIBUTIONS = ("normal", "uniform", "lognormal")
SAMPLING = ("lhs", "random")
MAX_RUNS = 1_000_000
TOP_LEVEL_NUMBERS = ("rtol", "atol", "h", "start_time", "stop_time", "communication_step",
                     "event_tolerance")
WORKER_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class ClusterError(CosimError):
    """The Dask scheduler cannot be reached or the cluster cannot start."""


# -- variations -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Variations:
    """One mapping of changes per run, in run order, and how they were made."""
    runs: tuple                       # of tuples ((name, value), ...)
    names: tuple                      # varied quantities, in column order
    kind: str = "none"                # grid, samples, grid+samples, specs, none
    seed: int | None = None
    description: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.runs)

    def as_dicts(self):
        return [dict(r) for r in self.runs]


def parse_range(text):
    """``NAME=A:B:N`` (N points from A to B, both included) or ``NAME=v1,v2,...``."""
    name, sep, rng = str(text).partition("=")
    name = name.strip()
    if not sep or not name:
        raise SpecError(f"--grid expects NAME=START:STOP:COUNT or NAME=V1,V2,..., got {text!r}")
    if ":" in rng:
        parts = rng.split(":")
        if len(parts) != 3:
            raise SpecError(f"--grid {text!r}: expected START:STOP:COUNT")
        try:
            a, b = float(parts[0]), float(parts[1])
            n = float(parts[2])
        except ValueError:
            raise SpecError(f"--grid {text!r}: START, STOP and COUNT must be numbers") from None
        if not (math.isfinite(a) and math.isfinite(b)):
            raise SpecError(f"--grid {text!r}: START and STOP must be finite")
        if not n.is_integer() or n < 1:
            raise SpecError(f"--grid {text!r}: empty range (COUNT must be an integer >= 1, got {parts[2]})")
        n = int(n)
        if n > MAX_RUNS:
            raise SpecError(f"--grid {text!r}: COUNT {n} is more than {MAX_RUNS}")
        if b < a or (a == b and n > 1):
            raise SpecError(f"--grid {text!r}: empty range (STOP {b:g} must be greater than START {a:g})")
        values = [a] if n == 1 else np.linspace(a, b, n).tolist()
    else:
        try:
            values = [float(v) for v in rng.split(",") if v.strip()]
        except ValueError:
            raise SpecError(f"--grid {text!r}: values must be numbers") from None
        if not values:
            raise SpecError(f"--grid {text!r}: empty range (no values)")
        if not all(math.isfinite(v) for v in values):
            raise SpecError(f"--grid {text!r}: values must be finite")
    return name, values


_DIST = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*=\s*([a-z]+)\s*\(\s*([^,()]+)\s*,\s*([^,()]+)\s*\)\s*$")


def parse_distribution(text):
    """``NAME=normal(MEAN,SD)`` | ``uniform(LOW,HIGH)`` | ``lognormal(MU,SIGMA)`` (of log)."""
    m = _DIST.match(str(text))
    if not m:
        raise SpecError(f"--dist expects NAME=normal(MEAN,SD), uniform(LOW,HIGH) or "
                        f"lognormal(MU,SIGMA), got {text!r}")
    name, kind, p1, p2 = m.groups()
    if kind not in DISTRIBUTIONS:
        raise SpecError(f"--dist {text!r}: unknown distribution {kind!r} (known: {', '.join(DISTRIBUTIONS)})")
    try:
        a, b = float(p1), float(p2)
    except ValueError:
        raise SpecError(f"--dist {text!r}: parameters must be numbers") from None
    if not (math.isfinite(a) and math.isfinite(b)):
        raise SpecError(f"--dist {text!r}: parameters must be finite")
    if kind in ("normal", "lognormal") and not b > 0:
        raise SpecError(f"--dist {text!r}: the spread must be > 0, got {b:g}")
    if kind == "uniform" and not b > a:
        raise SpecError(f"--dist {text!r}: HIGH must be greater than LOW")
    return name, (kind, a, b)


def _quantile(kind, a, b, u):
    from scipy import stats
    if kind == "normal":
        return stats.norm.ppf(u, loc=a, scale=b)
    if kind == "lognormal":
        return np.exp(stats.norm.ppf(u, loc=a, scale=b))
    return a + (b - a) * u


def sample(dists, n, seed=None, sampling="lhs"):
    """``n`` samples of the independent distributions ``{name: (kind, a, b)}``: Latin
    hypercube (one sample in each of n equal-probability strata per dimension,
    strata paired by random permutations) or plain random; returns (samples, seed)."""
    if sampling not in SAMPLING:
        raise SpecError(f"--sampling must be one of {', '.join(SAMPLING)}, got {sampling!r}")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_RUNS:
        raise SpecError(f"--samples must be an integer from 1 to {MAX_RUNS}, got {n!r}")
    seed = secrets.randbits(63) if seed is None else int(seed)
    if not 0 <= seed < 2 ** 63:
        raise SpecError(f"--seed must be an integer from 0 to 2**63-1, got {seed}")
    rng = np.random.default_rng(seed)
    names = list(dists)
    if sampling == "lhs":
        u = np.empty((n, len(names)))
        for j in range(len(names)):
            u[:, j] = (rng.permutation(n) + rng.random(n)) / n
    else:
        u = rng.random((n, len(names)))
    cols = {name: _quantile(*dists[name], u[:, j]) for j, name in enumerate(names)}
    return [{name: float(cols[name][i]) for name in names} for i in range(n)], seed


def make_variations(spec, grid=(), dists=(), samples=None, seed=None, sampling="lhs"):
    """Variations from ``--grid`` texts and ``--dist`` texts with ``samples`` draws
    (product: every grid point with every sample).  Every name is checked against
    the spec (an unknown parameter is an error before anything runs)."""
    axes = [parse_range(g) for g in grid]
    dist = dict(parse_distribution(d) for d in dists)
    names = [n for n, _ in axes] + list(dist)
    if len(set(names)) != len(names):
        raise SpecError(f"a quantity is varied twice: {names}")
    for name in names:
        check_variable(spec, name)
    points = [list(zip([n for n, _ in axes], combo)) for combo in itertools.product(*[v for _, v in axes])]
    drawn, used_seed = [], None
    if dist:
        if samples is None:
            raise SpecError("--dist needs --samples N")
        drawn, used_seed = sample(dist, samples, seed, sampling)
    elif samples is not None:
        raise SpecError("--samples needs at least one --dist NAME=normal(MEAN,SD)")
    if drawn:
        runs = [tuple(p) + tuple(s.items()) for p in points for s in drawn]
    else:
        runs = [tuple(p) for p in points] if axes else [()]
    if len(runs) > MAX_RUNS:
        raise SpecError(f"{len(runs)} runs, more than {MAX_RUNS}")
    kind = "+".join(k for k, on in (("grid", bool(axes)), ("samples", bool(drawn))) if on) or "none"
    desc = {"grid": list(grid), "dist": list(dists), "samples": samples, "sampling": sampling if dist else None,
            "seed": used_seed}
    return Variations(runs=tuple(runs), names=tuple(names), kind=kind, seed=used_seed, description=desc)


def check_variable(spec, name):
    """SpecError unless ``name`` is something a sweep can vary in ``spec``."""
    if name.startswith("blocks."):
        from .blocks import make_block
        from .spec import thaw
        parts = name.split(".", 2)
        blocks = {b.get("name"): b for b in thaw(spec.blocks)}
        if len(parts) != 3 or parts[1] not in blocks:
            raise SpecError(f"unknown parameter {name!r}: blocks are "
                            f"{', '.join(map(str, blocks)) or 'none'} (vary blocks.NAME.KEY)")
        block = dict(blocks[parts[1]])
        if parts[2] not in block:
            try:
                make_block({**block, parts[2]: 0.0})
            except CosimError:
                raise SpecError(f"unknown parameter {name!r}: block {parts[1]!r} has no "
                                f"{parts[2]!r}") from None
        return
    if name in TOP_LEVEL_NUMBERS:
        return
    param = name[7:] if name.startswith("params.") else name
    known = _model_parameters(spec)
    if known is not None and param not in known:
        raise SpecError(f"unknown parameter {name!r} of model {spec.model!r} (parameters: "
                        f"{', '.join(known) or 'none'}; also {', '.join(TOP_LEVEL_NUMBERS)}, blocks.NAME.KEY)")


def _model_parameters(spec):
    if spec.model_format != "name":
        return None
    from .models import model_class
    cls = model_class(spec.model)
    names = [p.name for p in cls.parameters]
    return names + list(getattr(cls, "configuration_keys", ()))


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


def specs_for(spec, variations):
    """The spec of every run (validated here, before anything is submitted)."""
    out = []
    for changes in variations.as_dicts():
        s = spec
        for name, value in changes.items():
            s = s.with_parameter(name, value)
        out.append(s)
    return out


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


def connect(scheduler=None, workers=None, timeout=10.0):
    """(client, description, close): an existing cluster (address or scheduler file),
    else an embedded LocalCluster on 127.0.0.1 with one single-threaded worker
    process per core (``workers`` to choose) and one BLAS/OpenMP thread each."""
    import logging

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
    file) or an embedded LocalCluster.  ``progress(done, total)`` is called as runs finish."""
    import time

    from distributed import as_completed
    if specs is None:
        variations = variations if variations is not None else Variations(runs=((),), names=())
        specs = specs_for(spec, variations)
    else:
        variations = Variations(runs=tuple(() for _ in specs), names=(), kind="specs",
                                description={"specs": list(labels or [s.name for s in specs])})
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
        if close is not None:
            close()
    for i, r in enumerate(results):
        if isinstance(r, RunFailure):
            r.index = i
    return SweepResult(specs=specs, variations=variations, results=results, wall_time_s=wall, cluster=where)


def write_plot(path, result):
    """Trajectory envelope of the first recorded signal (min/max over runs, and each
    run thin) and each metric against each varied quantity.  Needs matplotlib;
    returns False (nothing written) without it."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ok = [r for r in result.results if not isinstance(r, RunFailure)]
    metrics = result.metric_names()
    names = result.variations.names
    panels = 1 + (len(metrics) * len(names) if names else 0)
    panels = min(panels, 7)
    fig, axes = plt.subplots(panels, 1, figsize=(8, 2.6 * panels), squeeze=False)
    ax = axes[0, 0]
    if ok:
        sig = next(iter(result._signals(ok[0])))
        for r in ok[:200]:
            ax.plot(r.time, result._signals(r)[sig], color="0.6", lw=0.4)
        if all(len(r.time) == len(ok[0].time) for r in ok):
            stack = np.array([result._signals(r)[sig] for r in ok])
            ax.fill_between(ok[0].time, stack.min(0), stack.max(0), color="C0", alpha=0.25, label="envelope")
        ax.set_ylabel(sig)
        ax.set_xlabel("time [s]")
        ax.set_title(f"{len(ok)} runs of {result.specs[0].name or result.specs[0].model}")
    table = result.runs_table()
    k = 1
    for m in metrics:
        for n in names:
            if k >= panels:
                break
            a = axes[k, 0]
            a.plot(table.column(n).to_pylist(), table.column(m).to_pylist(), ".", ms=3)
            a.set_xlabel(n)
            a.set_ylabel(m)
            k += 1
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


__all__ = ["ClusterError", "RunFailure", "SweepResult", "Variations", "connect", "make_variations",
           "parse_distribution", "parse_range", "run_one", "sample", "specs_for", "sweep", "write_plot"]
