"""The variations of a sweep: one mapping ``{name: value}`` per run, in a fixed order.

* ``--grid NAME=START:STOP:COUNT`` (COUNT points, both ends included) or
  ``NAME=V1,V2,...``; several grids: the full factorial, in row-major order.
* ``--samples N --dist NAME=normal(MEAN,SD)|uniform(LOW,HIGH)|lognormal(MU,SIGMA)``:
  Latin hypercube (default) or plain random draws from ``numpy.random.default_rng(seed)``;
  the seed is chosen (and recorded) when not given.  Grid points x samples.
* ``NAME``: a model parameter (``l``), ``params.l``, a top-level number (``rtol``,
  ``stop_time``...) or a block's value (``blocks.pd.kp``); every name is checked
  against the spec before anything runs.
* The number of runs (grid points x samples) is checked against :data:`MAX_RUNS`
  before anything is drawn or built; the runs themselves are a :class:`RunTable`,
  made one at a time when asked for (the grid's axes and the drawn samples are
  stored, never their product).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
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


class RunTable(Sequence):
    """The runs of a sweep, made when asked for: run ``i`` is grid point ``i // n_samples``
    (the full factorial in row-major order: the last ``--grid`` varies fastest) with
    sample ``i % n_samples``; each run is a tuple ``((name, value), ...)``.  Holds the
    axes and the sample columns only (memory: their sum, not their product)."""

    def __init__(self, axes=(), samples=None, n_samples=0):
        self.axes = tuple((name, np.asarray(values, dtype=float)) for name, values in axes)
        self.samples = {name: np.asarray(col, dtype=float) for name, col in (samples or {}).items()}
        self._shape = tuple(len(v) for _, v in self.axes)
        self._per_point = max(int(n_samples), 1)
        self._len = math.prod(self._shape) * self._per_point

    def __len__(self):
        return self._len

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._len))]
        i = int(i)
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(f"run {i} of {self._len}")
        point, k = divmod(i, self._per_point)
        run = []
        for (name, values), size in zip(reversed(self.axes), reversed(self._shape)):
            point, j = divmod(point, size)
            run.append((name, float(values[j])))
        run.reverse()
        run.extend((name, float(col[k])) for name, col in self.samples.items())
        return tuple(run)

    def column(self, name):
        """The values of ``name`` over all runs, in run order (a float array)."""
        n = np.arange(self._len, dtype=np.int64)
        if name in self.samples:
            return self.samples[name][n % self._per_point]
        stride = self._per_point
        for (axis, values), size in zip(reversed(self.axes), reversed(self._shape)):
            if axis == name:
                return values[(n // stride) % size]
            stride *= size
        raise KeyError(name)


@dataclass(frozen=True)
class Variations:
    """One mapping of changes per run, in run order, and how they were made."""
    runs: Sequence                    # of tuples ((name, value), ...): a RunTable or a tuple
    names: tuple                      # varied quantities, in column order
    kind: str = "none"                # grid, samples, grid+samples, specs, none
    seed: int | None = None
    description: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.runs)

    def as_dicts(self):
        return [dict(r) for r in self.runs]

    def column(self, name):
        """The values of the varied quantity ``name`` in run order (a float array)."""
        if isinstance(self.runs, RunTable):
            return self.runs.column(name)
        return np.array([dict(r).get(name, math.nan) for r in self.runs], dtype=float)


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
        values = np.array([a]) if n == 1 else np.linspace(a, b, n)
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


def sample(dists, n, seed=None, sampling="lhs", columns=False):
    """``n`` samples of the independent distributions ``{name: (kind, a, b)}``: Latin
    hypercube (one sample in each of n equal-probability strata per dimension,
    strata paired by random permutations) or plain random; returns (samples, seed):
    a list of ``{name: value}``, or with ``columns`` ``{name: array of n values}``."""
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
    if columns:
        return cols, seed
    return [{name: float(cols[name][i]) for name in names} for i in range(n)], seed


def make_variations(spec, grid=(), dists=(), samples=None, seed=None, sampling="lhs"):
    """Variations from ``--grid`` texts and ``--dist`` texts with ``samples`` draws
    (product: every grid point with every sample).  Every name is checked against
    the spec (an unknown parameter is an error before anything runs), and the number
    of runs against :data:`MAX_RUNS` before anything is drawn; the runs are a
    :class:`RunTable` (made one at a time when asked for)."""
    axes = [parse_range(g) for g in grid]
    dist = dict(parse_distribution(d) for d in dists)
    names = [n for n, _ in axes] + list(dist)
    if len(set(names)) != len(names):
        raise SpecError(f"a quantity is varied twice: {names}")
    if dist and samples is None:
        raise SpecError("--dist needs --samples N")
    if samples is not None and not dist:
        raise SpecError("--samples needs at least one --dist NAME=normal(MEAN,SD)")
    if samples is not None and (isinstance(samples, bool) or not isinstance(samples, int)
                                or not 1 <= samples <= MAX_RUNS):
        raise SpecError(f"--samples must be an integer from 1 to {MAX_RUNS}, got {samples!r}")
    counts = [len(v) for _, v in axes] + ([samples] if dist else [])
    total = math.prod(counts)
    if total > MAX_RUNS:
        raise SpecError(f"{total} runs ({' x '.join(map(str, counts))}), more than the limit of "
                        f"{MAX_RUNS} runs a sweep makes")
    for name in names:
        check_variable(spec, name)
    cols, used_seed = {}, None
    if dist:
        cols, used_seed = sample(dist, samples, seed, sampling, columns=True)
    runs = RunTable(axes, cols, samples if dist else 0)
    kind = "+".join(k for k, on in (("grid", bool(axes)), ("samples", bool(dist))) if on) or "none"
    desc = {"grid": list(grid), "dist": list(dists), "samples": samples, "sampling": sampling if dist else None,
            "seed": used_seed}
    return Variations(runs=runs, names=tuple(names), kind=kind, seed=used_seed, description=desc)


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


class SpecsOf(Sequence):
    """The spec of every run of ``variations`` on ``spec``, made (and validated) when
    asked for: ``specs[i]`` is ``spec`` with the changes of run ``i``."""

    def __init__(self, spec, variations):
        self.spec, self.variations = spec, variations

    def __len__(self):
        return len(self.variations)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        s = self.spec
        for name, value in self.variations.runs[i]:
            s = s.with_parameter(name, value)
        return s


def specs_for(spec, variations):
    """The spec of every run, as a list (each validated here)."""
    return list(SpecsOf(spec, variations))


__all__ = ["RunTable", "SpecsOf", "Variations", "check_variable", "make_variations", "parse_distribution", "parse_range",
           "sample", "specs_for", "DISTRIBUTIONS", "SAMPLING", "MAX_RUNS", "TOP_LEVEL_NUMBERS"]
