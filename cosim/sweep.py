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
  process per core, one thread and one BLAS/OpenMP thread each, no dashboard),
  whose every connection is TLS with a certificate made for this run and held in
  memory (``distributed.Security.temporary()``): the scheduler, the workers and this
  client authenticate each other, so no other process -- of this user or another --
  can submit work to it.
* A scheduler address (``tls://host:port``, ``tcp://host:port``) or a scheduler
  file: an existing cluster (``dask scheduler`` + ``dask worker``).  ``tls://`` uses
  the TLS settings of the user's Dask configuration (``distributed.comm.tls.*``);
  plain ``tcp://`` to an address that is not this machine's loopback is warned about
  once (what comes back is unpickled: whoever can talk to that port can run code
  here).  ``timeout`` bounds every wait: for the scheduler file, the connection,
  and the first worker; a bad value is one :class:`ClusterError` line.
* Runs are made and submitted as they are needed (a bounded number in flight), so a
  large sweep starts at once and its specs never all exist together.
* Results: :meth:`SweepResult.write` -> ``runs.parquet`` (run x parameters x
  metrics, status, error) and ``timeseries.parquet`` (run x time x signals), via
  pyarrow, with the sweep's description (spec, variations, seed) in the file
  metadata; no wall times in the files, so a rerun with the same seed writes the
  same bytes.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
from dataclasses import dataclass

import numpy as np

from .errors import CosimError, CosimWarning
from .variations import (SpecsOf, Variations, make_variations, parse_distribution, parse_range,  # noqa: F401
                         sample, specs_for)

WORKER_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
SCHEMES = ("tls", "tcp")
MAX_SCHEDULER_FILE_BYTES = 64 * 1024  # a Dask scheduler file is ~1 kB of JSON


class ClusterError(CosimError):
    """The Dask scheduler cannot be reached or the cluster cannot start."""


class PlainTCPWarning(CosimWarning):
    """A sweep talks plain TCP (no encryption, no authentication) to another machine."""


_warned_plain = set()


def require_sweep_extra(what="cosim.sweep"):
    """dask, distributed, pyarrow and cryptography are importable, else a one-line
    :class:`~cosim.errors.MissingExtraError` naming the ``sweep`` extra."""
    from .extras import require
    for module in ("dask", "distributed", "pyarrow", "cryptography"):
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
        return run(SimulationSpec.from_dict(spec_dict, source=f"run {index}"), progress=False)
    except Exception as exc:  # recorded, never stops the sweep
        return RunFailure(index, f"{type(exc).__name__}: {' '.join(str(exc).split())}")


def dask_setup(worker):
    """The embedded cluster's worker preload: Ctrl-C in a terminal reaches every process
    of the foreground group, and a worker stopped by it prints Dask's tracebacks over the
    sweep's "interrupted" line.  A worker ignores SIGINT; the sweep's process handles it
    and closes the cluster (which stops the workers)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


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
            cols[name] = pa.array(self.variations.column(name), pa.float64())
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
        methods = sorted({str(sp.method) for sp in self.specs})
        if methods:
            lines.append(f"  method {', '.join(methods)}")
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


def check_timeout(timeout):
    """``timeout`` as a float number of seconds > 0 (nan, inf, <= 0: ClusterError)."""
    try:
        value = float(timeout)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ClusterError(f"--timeout must be a finite number of seconds > 0, got {timeout!r}")
    return value


def _one_line(exc, limit=160):
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:limit]}"


def _check_address(address, given):
    """``address`` if it is ``tls://HOST:PORT`` or ``tcp://HOST:PORT`` (HOST: a name or
    an IPv4/[IPv6] address, PORT 1-65535), else ClusterError naming ``given``."""
    scheme, sep, rest = address.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise ClusterError(f"--scheduler {given!r}: give tls://HOST:PORT, tcp://HOST:PORT or a Dask "
                           f"scheduler file (a JSON file written by `dask scheduler --scheduler-file`)")
    host, sep, port = rest.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    ok_host = bool(host) and all(c.isalnum() or c in "-._:" for c in host) and len(host) <= 253
    if not (sep and ok_host and port.isdigit() and 1 <= int(port) <= 65535):
        raise ClusterError(f"--scheduler {given!r}: expected {scheme}://HOST:PORT with a port from 1 to "
                           f"65535")
    return f"{scheme.lower()}://{rest}", host


def _read_scheduler_file(path, timeout):
    """The address in a Dask scheduler file, waiting up to ``timeout`` s for it to appear
    (a scheduler started at the same time writes it when it is up)."""
    import time
    deadline = time.monotonic() + timeout
    while True:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise ClusterError(f"--scheduler {path!r}: cannot read the scheduler file ({exc.strerror})") from None
        if st is not None:
            import stat as stat_module
            if not stat_module.S_ISREG(st.st_mode):
                raise ClusterError(f"--scheduler {path!r} is not a file: give tls://HOST:PORT, "
                                   f"tcp://HOST:PORT or a Dask scheduler file")
            if st.st_size > MAX_SCHEDULER_FILE_BYTES:
                raise ClusterError(f"--scheduler {path!r} is not a Dask scheduler file ({st.st_size} "
                                   f"bytes, more than {MAX_SCHEDULER_FILE_BYTES})")
            try:
                with open(path, "rb") as fh:
                    raw = fh.read(MAX_SCHEDULER_FILE_BYTES + 1)
            except OSError as exc:
                raise ClusterError(f"--scheduler {path!r}: cannot read the scheduler file "
                                   f"({exc.strerror})") from None
            if raw.strip():  # an empty file: the scheduler is still writing it
                try:
                    data = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, ValueError, RecursionError):
                    data = None
                address = data.get("address") if isinstance(data, dict) else None
                if not isinstance(address, str):
                    raise ClusterError(f"--scheduler {path!r} is not a Dask scheduler file (JSON with "
                                       f"an \"address\", written by `dask scheduler --scheduler-file`)")
                return _check_address(address, f"{path}: {address[:100]}")
        if time.monotonic() >= deadline:
            what = "does not exist" if st is None else "is empty"
            raise ClusterError(f"scheduler file {path!r} {what} (waited {timeout:g} s, --timeout)")
        time.sleep(min(0.1, max(deadline - time.monotonic(), 0.0)))


def _is_loopback(host):
    import ipaddress
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _security_for(address, host):
    """The client's ``distributed.Security`` for ``address``: for tls:// the user's Dask
    TLS configuration (which must name a CA and a client certificate); for tcp:// the
    configuration as it is, with a warning (once) when the host is not loopback."""
    import warnings

    from distributed.security import Security
    security = Security()  # distributed.comm.tls.* of the user's Dask configuration
    if address.startswith("tls://"):
        if not (security.tls_ca_file and security.tls_client_cert):
            raise ClusterError(
                f"--scheduler {address!r} uses TLS: set the cluster's CA and your client certificate "
                f"in the Dask configuration (distributed.comm.tls.ca-file, "
                f"distributed.comm.tls.client.cert and .key, e.g. the environment variables "
                f"DASK_DISTRIBUTED__COMM__TLS__CA_FILE, ..._CLIENT__CERT, ..._CLIENT__KEY)")
    elif not _is_loopback(host) and address not in _warned_plain:
        _warned_plain.add(address)
        warnings.warn(f"--scheduler {address}: plain TCP to another machine is neither encrypted nor "
                      f"authenticated, and results are unpickled (code runs here): anyone who can "
                      f"reach that port can run code as you; use a tls:// scheduler",
                      PlainTCPWarning, stacklevel=3)
    return security


def _connect_existing(scheduler, timeout):
    from distributed import Client
    given = str(scheduler)
    if "://" in given:
        address, host = _check_address(given.strip(), given)
    elif not os.path.exists(given) and re.fullmatch(r"[\w.-]+:\d+|\[[0-9A-Fa-f:.]+\]:\d+", given.strip()):
        raise ClusterError(f"--scheduler {given!r}: give the scheme, tls://{given.strip()} or "
                           f"tcp://{given.strip()} (or a Dask scheduler file)")
    else:
        address, host = _read_scheduler_file(given, timeout)
    security = _security_for(address, host)
    try:
        client = Client(address, security=security, timeout=f"{timeout}s")
    except Exception as exc:  # OSError, TimeoutError, ssl errors, TLS configuration errors
        raise ClusterError(f"scheduler {address!r} does not answer within {timeout:g} s "
                           f"({_one_line(exc)})") from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except Exception:
        client.close()
        raise ClusterError(f"scheduler {address!r} has no worker (waited {timeout:g} s, --timeout): "
                           f"start some with `dask worker {address}`") from None
    return client, f"cluster {client.scheduler.address}", client.close


def embedded_security():
    """A ``distributed.Security`` with a certificate made for this run (in memory only):
    TLS on every connection of the embedded cluster, each side checking the other's
    certificate.  Needs the ``cryptography`` package (``cosim[sweep]``)."""
    from distributed.security import Security
    try:
        return Security.temporary()
    except ImportError:
        raise ClusterError("the embedded Dask cluster needs the package cryptography (its TLS "
                           "certificate is made per run): pip install 'cosim[sweep]'") from None


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


class _CancelRaceFilter(logging.Filter):
    """Drops one log record of a Dask race: Ctrl-C reaching ``distributed.utils.sync``
    before its call started makes its ``cancel`` callback read a future that does not
    exist yet, and tornado logs that NameError with a traceback.  Nothing failed (the
    call never ran); the sweep says "interrupted" itself.  Every other record passes."""

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, NameError) and "sync.<locals>.cancel" in record.getMessage())


_CANCEL_RACE_FILTER = _CancelRaceFilter()


def _drop_the_cancel_race_record():
    logger = logging.getLogger("tornado.application")
    if _CANCEL_RACE_FILTER not in logger.filters:
        logger.addFilter(_CANCEL_RACE_FILTER)


def connect(scheduler=None, workers=None, timeout=10.0):
    """(client, description, close): an existing cluster (``tls://`` / ``tcp://`` address
    or scheduler file), else an embedded LocalCluster on 127.0.0.1 with one
    single-threaded worker process per core (``workers`` to choose) and one BLAS/OpenMP
    thread each, all of its connections TLS with a per-run certificate."""
    require_sweep_extra("cosim.sweep.connect")
    import dask
    timeout = check_timeout(timeout)
    if scheduler is not None:
        return _connect_existing(scheduler, timeout)
    from distributed import Client, LocalCluster
    _check_main_guard()
    n = workers or os.cpu_count() or 1
    security = embedded_security()
    with dask.config.set({"distributed.nanny.pre-spawn-environ": dict(
            dask.config.get("distributed.nanny.pre-spawn-environ", {}), **WORKER_ENV),
            "distributed.comm.timeouts.connect": f"{timeout}s",
            # no dashboard; the HTTP servers Dask starts anyway (127.0.0.1, a free port)
            # answer health checks only: no task names, logs or worker details
            "distributed.scheduler.http.routes": ["distributed.http.health"],
            "distributed.worker.http.routes": ["distributed.http.health"]}):
        try:
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   protocol="tls://", security=security, dashboard_address=None,
                                   preload=["cosim.sweep"],  # dask_setup: workers ignore Ctrl-C
                                   scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                                   silence_logs=logging.ERROR)
        except Exception as exc:
            raise ClusterError(f"cannot start a local Dask cluster: {_one_line(exc)}") from None
    client = Client(cluster, security=security, timeout=f"{timeout}s")

    def close():
        # the scheduler logs, as an error, each result the client stops waiting for
        # (Ctrl-C, an error): the sweep says what happened itself
        quiet = logging.getLogger("distributed")
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)
        try:
            client.close()
            cluster.close()
        finally:
            quiet.setLevel(level)
    return client, f"embedded LocalCluster ({n} worker processes x 1 thread, TLS)", close


def sweep(spec, variations=None, client=None, *, scheduler=None, workers=None, timeout=10.0,
          progress=None, specs=None, labels=None):
    """Run ``spec`` once per variation (or each spec of ``specs``, named by ``labels`` in
    the files, default their names) on Dask; returns a :class:`SweepResult` in run order.
    ``client``: a ``distributed.Client`` to use; else ``scheduler`` (address or scheduler
    file) or an embedded LocalCluster.  ``progress``: None (default) draws a bar on
    stderr when it is a terminal and the sweep takes longer than 2 s (elsewhere a plain
    line every 10 s), True always, False never, or a callable ``progress(done, total)`` called as runs finish
    (:mod:`cosim.progress`).  Each run's spec is made when it is submitted (at most a few
    per worker in flight); a run whose varied value the spec refuses is recorded as
    failed, like a run that fails."""
    import time

    require_sweep_extra("cosim.sweep")
    from distributed import as_completed
    if specs is None:
        variations = variations if variations is not None else Variations(runs=((),), names=())
        specs = SpecsOf(spec, variations)
        _check_first_and_ends(spec, specs, variations)  # systematic mistakes before the cluster starts
    else:
        variations = Variations(runs=tuple(() for _ in specs), names=(), kind="specs",
                                description={"specs": list(labels or [s.name for s in specs])})
    from .progress import progress_callback
    _drop_the_cancel_race_record()
    progress, close_progress = progress_callback(progress, 0, len(specs), unit="", label="runs")
    close = None
    if client is None:
        client, where, close = connect(scheduler, workers, timeout)
    else:
        where = f"client {client.scheduler.address}"
    total = len(specs)
    results = [None] * total
    state = {"done": 0, "next": 0}

    def finished(i, value):
        results[i] = value
        state["done"] += 1
        if progress is not None:
            progress(state["done"], total)

    try:
        wall0 = time.perf_counter()
        try:
            threads = sum(client.nthreads().values())
        except Exception:
            threads = 1
        window = max(16, 4 * threads)   # runs in flight: every worker busy, specs made as needed
        index = {}
        pending = as_completed()

        def submit_more():
            batch, idx = [], []
            while state["next"] < total and len(index) + len(batch) < window:
                i = state["next"]
                state["next"] += 1
                try:
                    s = specs[i]
                except CosimError as exc:  # a varied value the spec refuses: this run fails
                    finished(i, RunFailure(i, f"{type(exc).__name__}: {' '.join(str(exc).split())}"))
                    continue
                batch.append(dict(s.to_dict(), __index__=i))
                idx.append(i)
            if batch:
                for fut, i in zip(client.map(run_one, batch, pure=False), idx):
                    index[fut.key] = i
                    pending.add(fut)

        submit_more()
        while index:
            fut = next(pending)
            i = index.pop(fut.key)
            try:
                value = fut.result()
            except Exception as exc:  # e.g. the task was lost more often than allowed
                value = RunFailure(i, f"{type(exc).__name__}: {' '.join(str(exc).split())}")
            finished(i, value)
            fut.release()
            if len(index) <= window // 2:
                submit_more()
        wall = time.perf_counter() - wall0
    finally:
        close_progress()
        if close is not None:
            close()
    for i, r in enumerate(results):
        if isinstance(r, RunFailure):
            r.index = i
    return SweepResult(specs=specs, variations=variations, results=results, wall_time_s=wall, cluster=where)


def _check_first_and_ends(spec, specs, variations):
    """The first run's spec and each varied quantity at its smallest and largest value,
    validated before anything starts (a value the spec refuses there is a SpecError)."""
    if len(specs):
        specs[0]
    for name in variations.names:
        values = variations.column(name) if len(variations) else ()
        if len(values):
            for value in (float(np.min(values)), float(np.max(values))):
                spec.with_parameter(name, value)


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


__all__ = ["ClusterError", "PlainTCPWarning", "RunFailure", "SpecsOf", "check_timeout", "embedded_security", "SweepResult", "Variations", "connect", "make_variations",
           "parse_distribution", "parse_range", "run_one", "sample", "specs_for", "sweep", "write_plot"]
