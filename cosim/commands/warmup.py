"""``cosim warmup [MODEL …]``: compile the numba kernels ahead of time.

A first run of a model on the compiled backend compiles its kernels (tens of
seconds) and caches them on disk; warming up does that once, e.g. in a
container build or before a real-time session, and prints what it did.
"""
import sys
import threading
import time

from .._version import install_hint
from ..errors import ConvergenceError, CosimError

HEARTBEAT_S = 8.0   # the longest the command is quiet: under 10 s with room for a busy machine


class Heartbeat:
    """A line on stderr whenever the warmup has been quiet for ``every`` seconds, naming
    what runs (:attr:`doing`, or the methods the worker processes have under way), from
    this process's own timer: worker processes print what they start and finish, but
    before that a spawned worker imports cosim and numba and generates the method's
    module, silent for a long while on a loaded machine.  Every notice of this process
    (:func:`cosim.jit.say`) and every row it prints (:meth:`note`) restarts the count.
    ``clock`` and ``out`` are for tests; :meth:`poll` decides, the thread only calls it."""

    def __init__(self, every=HEARTBEAT_S, clock=time.monotonic, out=None):
        from .. import jit  # noqa: PLC0415
        self.every, self.clock = every, clock
        self.out = out or jit.say
        self.t0 = self.last = clock()
        self.doing = ""            # what this process does now
        self.futures = {}          # future -> what a worker does with it (in submission order)
        self.workers = 1           # how many worker processes take them
        self._stop = threading.Event()
        self._thread = None

    @staticmethod
    def worker_initializer():
        """(worker process initializer) No periodic "still compiling" lines there: this
        heartbeat says what the workers do; their start and end lines remain."""
        from .. import jit  # noqa: PLC0415
        jit.compiling.periodic = False

    def note(self, *_):
        """A line was printed: the quiet time starts again."""
        self.last = self.clock()

    def running(self):
        """What is under way: the workers' jobs that have started (the pool marks one
        more than it has workers as running: the first ``workers`` of them, in the order
        submitted, are the ones a worker has), else :attr:`doing`."""
        busy = [what for future, what in list(self.futures.items()) if future.running()]
        return ", ".join(busy[:self.workers]) or self.doing

    def poll(self):
        """Print a line if quiet for ``every`` s; the seconds until the next check."""
        now = self.clock()
        if now - self.last >= self.every:
            what = self.running()
            self.out(f"warmup still busy{' with ' + what if what else ''} "
                     f"({now - self.t0:.0f} s in all)")
            self.last = now
        return max(self.last + self.every - now, 0.0)

    def __enter__(self):
        from .. import jit  # noqa: PLC0415
        jit.listeners.append(self.note)

        def beat():
            while not self._stop.wait(min(self.poll(), self.every)):
                pass

        self._thread = threading.Thread(target=beat, name="cosim-warmup-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        from .. import jit  # noqa: PLC0415
        self._stop.set()
        self._thread.join()
        if self.note in jit.listeners:
            jit.listeners.remove(self.note)
        return False


def warm_up(model_names=None, workers=1, heartbeat=None):
    """Compile (or load from the disk cache) every compiled method for the
    given library models (default: all with kernels).  Returns rows of
    (model, method, seconds, backend).  ``workers`` > 1 compiles that many
    entries at once in worker processes (each entry is its own cache file);
    this process then only loads them, and the seconds are the workers'.
    ``heartbeat``: a running :class:`Heartbeat` told what is under way."""
    heartbeat = heartbeat or _NoHeartbeat()
    from ..integrators import COMPILED_REGISTRY, resolve_backend
    from ..models import available_models, load_model
    names = list(model_names) if model_names else available_models()
    models = [(name, load_model(name)) for name in names]
    if not model_names:
        models += _urdf_robots()
    rows, jobs = [], []
    for name, model in models:
        for method in COMPILED_REGISTRY:
            if resolve_backend(method, model, "auto") != "numba":
                if model_names:
                    rows.append((name, method, 0.0, "python (not compiled)"))
                continue
            jobs.append((name, model, method))
    if not model_names:  # the entries of tests/test_auto_kernels.py
        jobs += [(f"{name}{AUTO}", _auto_kernel_model(name), method) for name, method in AUTO_KERNEL_ENTRIES]
    compiled = {}
    # methods compiled once per machine for every model: here, before the models'
    # kernels (which then compile in seconds each)
    from ..integrators import ONE_IMPLEMENTATION, compile_method  # noqa: PLC0415
    done = set()
    for method in dict.fromkeys(m for _, _, m in jobs if m in ONE_IMPLEMENTATION):
        heartbeat.doing = f"method {method}"
        t0 = time.perf_counter()
        module = compile_method(method)
        if module not in done:
            done.add(module)
            rows.append(("(every model)", method, time.perf_counter() - t0, "numba method"))
    if workers > 1 and len(jobs) > 1:
        import concurrent.futures  # noqa: PLC0415
        import multiprocessing  # noqa: PLC0415
        # one job per entry file (the BDF variants share theirs)
        first = {}
        for name, _, method in jobs:
            first.setdefault((name, COMPILED_REGISTRY[method].split(":")[0]), method)
        with concurrent.futures.ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=heartbeat.worker_initializer) as pool:
            futures = {pool.submit(_warm_by_name, name, method): (name, method)
                       for (name, _), method in first.items()}
            heartbeat.workers = workers
            heartbeat.futures.update({f: f"{name} {method}" for f, (name, method) in futures.items()})
            for future in concurrent.futures.as_completed(futures):
                compiled[futures[future]] = future.result()
            heartbeat.futures.clear()
    for name, model, method in jobs:
        heartbeat.doing = f"{name} {method}"
        seconds = _warm(model, method)
        rows.append((name, method, compiled.get((name, method), seconds), "numba"))
    return rows


# kernel models without derivative kernels (generated: cosim.models.auto_kernels), one
# method each — tests/test_auto_kernels.py runs them
AUTO = " (auto derivatives)"
AUTO_KERNEL_ENTRIES = (("pendulum", "generalized-alpha"), ("two_link", "generalized-alpha"),
                       ("andrews", "bdf"))


def _auto_kernel_model(name):
    from ..models import model_class  # noqa: PLC0415
    from ..models.auto_kernels import without_derivative_kernels  # noqa: PLC0415
    return without_derivative_kernels(model_class(name))()


def _warm(model, method):
    """Seconds to compile (or load) ``method``'s entry for ``model``."""
    from ..integrators import make_integrator  # noqa: PLC0415
    t0 = time.perf_counter()
    integ = make_integrator(model, method, backend="numba", h=1e-4)
    integ.initialize()
    try:
        integ.advance(1e-4)        # compiles (or loads) the step loop
        integ.restart()            # … and the restart path (same entry)
        integ.advance(2e-4)
    except ConvergenceError:
        pass   # the method cannot take this model's first steps at h = 1e-4 (spark on
        # andrews); its code and the model's kernels are loaded all the same
    return time.perf_counter() - t0


def _warm_by_name(name, method):
    """(worker process) :func:`_warm` for a library model or "urdf robots"."""
    if name == "urdf robots":
        model = _urdf_robots()[0][1]
    elif name.endswith(AUTO):
        model = _auto_kernel_model(name[:-len(AUTO)])
    else:
        from ..models import load_model  # noqa: PLC0415
        model = load_model(name)
    return _warm(model, method)


def _compile_one(method):
    """A worker of _compile_methods: compile (or load) one method; its seconds."""
    from ..integrators import compile_method  # noqa: PLC0415
    t0 = time.perf_counter()
    compile_method(method)
    return time.perf_counter() - t0


def _urdf_robots():
    """URDF robots share one kernel set (cosim.models.rigid_body): warming the
    project's two-link URDF compiles it for every robot (needs pinocchio)."""
    from pathlib import Path  # noqa: PLC0415
    try:
        from ..models.urdf import load_urdf  # noqa: PLC0415
        cls = load_urdf(Path(__file__).resolve().parents[1] / "data" / "urdf" / "two_link.urdf")
    except CosimError:  # pinocchio not installed: no URDF robots to warm
        return []
    return [("urdf robots", cls())]


def _cmd(args):
    from ..jit import numba_available, unavailable_reason
    if not numba_available():
        raise CosimError(f"numba is not importable ({unavailable_reason()}); "
                         f"install the extra: {install_hint('fast')}")
    with Heartbeat() as heartbeat:
        if args.methods:
            return _compile_methods(args.jobs, heartbeat)
        for model, method, seconds, backend in warm_up(args.models, workers=args.jobs,
                                                       heartbeat=heartbeat):
            print(f"{model:>24s}  {method:<20s} {backend:<20s} {seconds:7.2f} s")
        sys.stdout.flush()
    return 0


# the methods that take longest to compile (measured: 100-200 s each cold), started first
_SLOWEST = ["generalized-alpha", "local-index1", "spark", "bdf", "block-lstable", "rkc-penalty"]


def _compile_methods(jobs=1, heartbeat=None):
    """Compile every method once per machine (independent of the model): one line per
    method with its time (scripts/setup.sh).  ``jobs`` > 1 compiles that many methods
    at once in worker processes (each method is its own cache file).  ``heartbeat``: a
    running :class:`Heartbeat` told what is under way and of every line printed."""
    from ..integrators import METHOD_REGISTRY, compile_method  # noqa: PLC0415
    heartbeat = heartbeat or _NoHeartbeat()
    heartbeat.doing = "the methods"

    def row(text):
        print(text, flush=True)
        heartbeat.note()
    first = {}   # compiled entry (module) -> the first method that uses it
    for method in sorted(METHOD_REGISTRY):
        first.setdefault(METHOD_REGISTRY[method].split(":")[0], method)
    if jobs > 1 and len(first) > 1:
        import concurrent.futures  # noqa: PLC0415
        import multiprocessing  # noqa: PLC0415
        with concurrent.futures.ProcessPoolExecutor(
                min(jobs, len(first)), mp_context=multiprocessing.get_context("spawn"),
                initializer=heartbeat.worker_initializer) as pool:
            longest_first = sorted(first.values(), key=lambda m: (m not in _SLOWEST, _SLOWEST.index(m)
                                                                   if m in _SLOWEST else 0))
            futures = {pool.submit(_compile_one, method): method for method in longest_first}
            heartbeat.workers = min(jobs, len(first))
            heartbeat.futures.update(futures)
            for future in concurrent.futures.as_completed(futures):
                row(f"{futures[future]:>24s}  {'compiled (or loaded)':<28s} {future.result():7.2f} s")
            heartbeat.futures.clear()
        for method in sorted(METHOD_REGISTRY):
            if method not in first.values():
                row(f"{method:>24s}  {'shares that compiled entry':<28s} {0.0:7.2f} s")
    else:
        for method in sorted(METHOD_REGISTRY):
            heartbeat.doing = f"method {method}"
            t0 = time.perf_counter()
            compile_method(method)
            what = "compiled (or loaded)" if method in first.values() else "shares that compiled entry"
            row(f"{method:>24s}  {what:<28s} {time.perf_counter() - t0:7.2f} s")
    # the kernel set every URDF robot shares (the robot is in its parameters): compiled
    # now, a new robot then starts without compiling anything
    from ..integrators.model_functions import compiled_functions, compiled_unsupported  # noqa: PLC0415
    heartbeat.doing = "the URDF robots' kernels (reading a robot)"
    for name, model in _urdf_robots():
        heartbeat.doing = "the URDF robots' kernels"
        t0 = time.perf_counter()
        compiled_unsupported(model, nonholonomic=True)   # the check a first run makes (markers kept)
        compiled_functions(model)
        row(f"{name:>24s}  {'kernels compiled (or loaded)':<28s} {time.perf_counter() - t0:7.2f} s")
        # the position-limit stops' switching functions (every robot with limits)
        from ..models.urdf import compiled_stop_functions  # noqa: PLC0415
        heartbeat.doing = "the URDF position-limit stops"
        t0 = time.perf_counter()
        compiled_stop_functions()
        row(f"{'urdf stops':>24s}  {'compiled (or loaded)':<28s} {time.perf_counter() - t0:7.2f} s")
    return 0


class _NoHeartbeat:
    """Stands in for a :class:`Heartbeat` where none runs (``warm_up`` called from Python)."""

    worker_initializer = None
    doing = ""
    workers = 1

    def __init__(self):
        self.futures = {}

    def note(self, *_):
        pass


def register(sub):
    p = sub.add_parser("warmup", help="compile the numba kernels of library models ahead of time")
    p.add_argument("models", nargs="*", metavar="MODEL", help="library models (default: all with kernels)")
    p.add_argument("--methods", action="store_true",
                   help="only the methods compiled once for every model (what scripts/setup.sh runs)")
    p.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                   help="compile N entries at once in worker processes (default 1)")
    p.set_defaults(func=_cmd)
