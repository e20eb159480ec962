"""The co-simulation stepper: :class:`Simulation` (FMI co-simulation semantics).

One continuous plant (a library model, a ``module:Class`` spec or a model
instance) integrated by one method, plus optional discrete blocks (PID,
state feedback, sample-and-hold, user functions; :mod:`cosim.blocks`), advanced
in communication steps ``do_step(t, h)``.

Semantics (DESIGN.md "Stepper"; seed 001 §3.5, §3.7; seed 000 §5.3, §7):

* **Zero-order hold.** External inputs set with :meth:`set_inputs` and block
  outputs are held constant until changed.  A changed plant input is a
  discontinuity: the integrator is told (``Integrator.set_inputs`` restarts
  the method), it never smooths across it.
* **Multirate.** Each block has a sample time T and offset; the base step is
  the exact gcd of all sample times (:mod:`cosim.multirate`, rational
  arithmetic).  The integrator is advanced exactly onto every sample instant,
  never across one.  Blocks execute at the *start* of the interval they
  govern: at a sample instant t_s (including t_s equal to the communication
  time at the start of a ``do_step``) the stepper (1) samples the plant
  outputs at t_s with the inputs held so far, (2) executes every block due at
  t_s in the order the blocks were given — a block reading another block's
  output sees the value computed at this instant if that block is listed
  earlier, else its held value — and (3) updates the plant inputs driven by
  block outputs (ZOH from t_s on).  A sample instant that coincides with the
  end of a communication step is executed at the start of the next step, after
  the inputs for that step were set.
* **State events.** The model's switching functions are evaluated after each
  accepted integrator step; a sign change is located on the dense output
  (:func:`cosim.events.locate`, Illinois with bisection safeguard) to
  ``event_tolerance`` seconds; the integrator is rolled back to the start of
  that step and advanced exactly to the event time (no step crosses an
  event), the jump map ``model.apply_event`` is applied (several events
  located at the same time: ``model.apply_events`` of them all, by default each
  one's jump map in index order), and the integrator restarts
  (``reset_point``).  A switching function that a new held input moves across
  zero (``set_inputs``, or a block's output at its sample instant), or a new
  tunable parameter value, fires its event at that instant the same way.  Every event is appended to
  :attr:`event_log` with its time.  A *terminal* event (or a block raising
  :class:`~cosim.blocks.StopSimulation`) stops the simulation: the current
  ``do_step`` and all later ones complete with the state frozen at the stop
  (``stopped`` is True, ``stop_time`` says when, the log ends with a
  ``{"kind": "stop"}`` entry); communication time still advances.  The log
  keeps the newest ``state_schema.MAX_EVENT_LOG`` entries (``stats["events"]``
  counts them all), so memory stays bounded over long runs.
  Chattering (more than ``max_chattering_events`` events, each within
  ``chattering_window`` s of the previous one) raises ChatteringError (state
  unchanged) or, with ``on_chattering="stop"``, stops with a logged
  ``"chattering"`` event.
* **All or nothing.** A failing ``do_step``/``set_inputs``/``set_state``
  raises a :mod:`cosim.errors` exception and leaves the simulation exactly as
  before the call (``serialize_state()`` bytes identical).
* **State.** ``get_state``/``set_state`` (in-memory, cheap) and
  ``serialize_state``/``deserialize_state`` (versioned, checksummed, no
  pickle; :mod:`cosim.serialization`) capture everything needed to continue
  bit-identically: time, integrator state (incl. method history), inputs,
  block states and sample counters, switching-function values, event log,
  statistics, parameters.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Mapping

import numpy as np

from . import constraint_guard, derivatives, fixed_step, serialization
from .blocks import Block, StopSimulation, make_block, unit_expression
from .errors import (ChatteringError, ConstraintDriftWarning, ConstraintViolationError,
                     ConvergenceError, CosimError, FixedStepAccuracyWarning, InputLimitWarning,
                     InvalidInputError, ModelDefinitionError,
                     StateError,
                     UnknownParameterError)
from .events import ChatterMonitor, crossed, crossings, event_values, locate
from .integrators import Integrator, make_integrator, resolve_backend
from .jit import check_backend
from .method_choice import resolve_method
from .models import load_model
from .model_probe import probe_model, probe_parameters
from .multirate import SampleClock, base_step, exact_time
from .state_schema import MAX_EVENT_LOG, check_simulation_state, check_solved_points
from .validation import MAX_INPUT, finite_float, finite_vector, oversized_input

_EPS = np.finfo(float).eps
_INF = math.inf
_hypot = math.hypot
_NDARRAY = np.ndarray
_F64 = np.dtype(np.float64)   # (numpy's one float64 dtype: other arrays take the long way)


def _real_finite(x):
    """A finite real number (numpy's complex scalars convert to float without their
    imaginary part; they are refused here, not truncated)."""
    return not isinstance(x, (complex, np.complexfloating)) and math.isfinite(x)


_TIME_MATCH = 1e-12  # relative tolerance for do_step's t against sim.time


def _plain(value):
    """JSON-able copy of a config value (arrays -> lists, unknown -> repr)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return repr(value)


def _same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    try:
        return bool(a == b)
    except ValueError:
        return np.array_equal(np.asarray(a), np.asarray(b))


def _parse_connection(item):
    if isinstance(item, str):
        src, sep, dst = item.partition("->")
        if not sep:
            raise InvalidInputError(f"connection {item!r} must read 'source -> destination'")
        return src.strip(), dst.strip()
    if isinstance(item, Mapping):
        try:
            return str(item["from"]).strip(), str(item["to"]).strip()
        except KeyError:
            raise InvalidInputError(f"connection {dict(item)!r} needs 'from' and 'to'") from None
    try:
        src, dst = item
    except (TypeError, ValueError):
        raise InvalidInputError(f"connection {item!r} must be (source, destination)") from None
    return str(src).strip(), str(dst).strip()


def _augmented_plant(spec, model, params, exact):
    """LTI plant with the exact sine inputs appended as signal generators (seed 001
    §3.5, example 3.4): these inputs are reproduced exactly, not held."""
    from .errors import SpecError
    from .integrators.state_transition import augment_model
    from .models.lti import LTIModel
    from .signals import InputSignal
    plant = load_model(model, **params)
    if not isinstance(plant, LTIModel):
        raise SpecError(f"'exact' sine inputs {sorted(exact)} need an LTI plant, "
                        f"model {plant.name!r} is not one")
    driven = {str(c).partition("->")[2].strip() if isinstance(c, str) else None for c in spec.connections}
    for name in exact:
        if name not in plant.input_names or name in driven:
            raise SpecError(f"exact sine input {name!r} must be an undriven plant "
                            f"input (plant inputs: {', '.join(plant.input_names)})")
    return augment_model(plant, {n: InputSignal(n, s).generator(spec.start_time) for n, s in exact.items()})


def _robot_file(model):
    """The model class of a URDF file named in Python (``"robot.urdf"`` or a path
    object); other models unchanged.  Only the Python API reads such a path: a spec,
    scenario, FMU or ROS parameter names a URDF its own way (:meth:`Simulation.from_spec`)."""
    import os  # noqa: PLC0415
    from .models import is_urdf_spec  # noqa: PLC0415
    if isinstance(model, os.PathLike):
        path = os.fspath(model)
        if not (isinstance(path, str) and path.lower().endswith(".urdf")):
            raise InvalidInputError(f"model path {path!r}: a model file named by a path must be a "
                                    f"URDF (ROBOT.urdf); a Python model is a class, an instance "
                                    f"or 'package.module:Class'")
        model = path
    if isinstance(model, str) and is_urdf_spec(model):
        from .models.urdf import load_urdf  # noqa: PLC0415
        return load_urdf(model)
    return model


class Simulation:
    """Co-simulation of one plant model with discrete blocks, advanced in communication
    steps :meth:`do_step` with zero-order-hold inputs (semantics: the docstring of
    :mod:`cosim.simulation`; docs/concepts.md).

    ``model``: a library name, ``package.module:Class``, a model class or instance, or a
    URDF file (``"robot.urdf"`` or a :class:`pathlib.Path`; ``cosim.models.urdf.load_urdf``
    also takes the output frames and position limits);
    ``method``: see ``cosim.available_methods()``; None or ``"auto"``: the default rule of
    :mod:`cosim.method_choice` (dopri5 for a multibody model, with blocks or not;
    with a fixed ``h`` rk4 where it is stable at h, else generalized-alpha;
    state-transition for LTI); ``params``: model parameters;
    ``rtol``/``atol`` or a fixed step ``h``; ``method_options``: the method's options;
    ``blocks``/``connections``: discrete blocks (:mod:`cosim.blocks`) and ``"src ->
    dst"`` signal connections; ``backend``: ``"auto"``, ``"numba"`` or ``"python"``;
    ``max_ic_repair``: the largest initial-condition repair accepted; ``check``:
    ``"quick"`` or ``"off"`` (the set-up model check); ``constraint_check``: ``"auto"``
    (default: the full constraint set checked after every communication step against a
    bound from the tolerances, :mod:`cosim.constraint_guard`, wherever a wrong answer is
    possible: user models, constraints set aside as redundant, a singular start, methods
    that only bound the drift), ``"step"`` (every constrained model) or ``"off"``.  A failing call raises a
    :mod:`cosim.errors` exception and leaves the simulation unchanged."""

    def __init__(self, model="pendulum", method=None, params=None, rtol=1e-6,
                 atol=1e-8, h=None, method_options=None, blocks=(), connections=(), start_time=0.0,
                 event_tolerance=1e-10, max_chattering_events=50, chattering_window=None,
                 on_chattering="error", backend="auto", max_ic_repair=None, check=None,
                 constraint_check="auto"):
        self.model = load_model(_robot_file(model), **dict(params or {}))
        # check="quick": the model checker at the initial state before anything runs (the
        # default for user models: a wrong hand-derived C_q or γ otherwise ends in a Newton
        # failure or, worse, a plausible wrong result; costs milliseconds); "off": skip it
        # (the default for the library's models, which the test suite checks).
        self.user_model = is_user_model(self.model)
        self.check = ("quick" if self.user_model else "off") if check is None else check
        if self.check not in ("quick", "off"):
            raise InvalidInputError(f"check must be 'quick' or 'off', got {check!r}")
        if self.check == "quick":
            _quick_check(self.model)
        if constraint_check not in ("auto", "step", "off"):
            raise InvalidInputError(f"constraint_check must be 'auto', 'step' or 'off', "
                                    f"got {constraint_check!r}")
        self.constraint_check = constraint_check
        # a start the IC analysis would move by more than this is an error (issue 19)
        self.max_ic_repair = None if max_ic_repair is None else \
            finite_float("max_ic_repair", max_ic_repair, nonnegative=True)
        # "auto": the compiled (numba) twin where it exists for this method and
        # model, else the Python reference (cosim.jit); results agree to 1e-10
        self.requested_backend = check_backend(backend)
        # None or "auto": the default rule (cosim.method_choice); an explicit method wins
        self.method = resolve_method(method, self.model, fixed_step=h,
                                     driven=bool(blocks), backend=self.requested_backend)
        self.method_options = dict(method_options or {})
        self.rtol, self.atol, self.h = rtol, atol, h
        self.start_time = finite_float("start_time", start_time)
        self.event_tolerance = finite_float("event_tolerance", event_tolerance, positive=True)
        self.chattering_window = (100.0 * self.event_tolerance if chattering_window is None else
                                  finite_float("chattering_window", chattering_window, positive=True))
        # an integer >= 1, never rounded (2.5 is an error, not 2)
        if isinstance(max_chattering_events, bool) or not isinstance(
                max_chattering_events, (int, np.integer, float, np.floating)) or \
                not float(max_chattering_events).is_integer() or max_chattering_events < 1:
            raise InvalidInputError(f"max_chattering_events must be an integer >= 1, "
                                    f"got {max_chattering_events!r}")
        self.max_chattering_events = int(max_chattering_events)
        if on_chattering not in ("error", "stop"):
            raise InvalidInputError(f"on_chattering must be 'error' or 'stop', got {on_chattering!r}")
        self.on_chattering = on_chattering
        self._initial_params = dict(self.model.params)
        # inputs the model clips (URDF effort limits): the first clip of each is said once,
        # by on_notice(message) (an adapter's logger) or as an InputLimitWarning
        self.on_notice = None
        self._input_limits = getattr(self.model, "input_limits", None)
        self._clipped_inputs = set()
        self._limit_pairs = ()
        # make (and validate) the integrator once here so a bad method fails early
        self.backend = resolve_backend(self.method, self.model, self.requested_backend)
        self.integrator = make_integrator(self.model, self.method, rtol=rtol, atol=atol, h=h,
                                          backend=self.backend, **self.method_options)

        self.blocks = tuple(make_block(b) for b in blocks)
        names = [b.name for b in self.blocks]
        if len(set(names)) != len(names):
            raise InvalidInputError(f"block names must be unique, got {names}")
        # the blocks' tunable parameters, "block.name" (cosim.blocks module docstring)
        self._block_params = {f"{b.name}.{p.name}": (j, p.name)
                              for j, b in enumerate(self.blocks) for p in b.parameters()}
        clash = sorted(set(self._block_params) & {p.name for p in self.model.parameters})
        if clash:
            raise InvalidInputError(f"block parameter {clash[0]!r} has the name of a parameter of "
                                    f"model {self.model.name!r}; rename the block")
        self._initial_block_params = self._block_parameter_values()
        self._wire(connections)
        if self.blocks:
            self._base_step = base_step([b.sample_time for b in self.blocks],
                                        [b.offset for b in self.blocks])
        else:
            self._base_step = None
        self._grid_tol = 0.0 if self._base_step is None else 1e-7 * float(self._base_step)
        self._event_directions = [int(e.direction) for e in self.model.events]
        self._event_terminal = [bool(e.terminal) for e in self.model.events]
        self._has_events = bool(self.model.events)
        self._fast = not self.blocks and not self._has_events
        # a model whose events a cheap check after one compiled call can rule out (the
        # stops of a URDF robot): the fast path runs, and only a step the check does not
        # clear is taken again on the event path (_screened_step)
        self._screen = getattr(self.model, "quiet_step", None) \
            if self._has_events and not self.blocks else None
        self._inputs_move_events = getattr(self.model, "inputs_move_events", None)
        self._screen_kind = None
        self._screen_span = math.inf  # longer communication steps: the event path at once
        self._screen_retry = 0
        self._taken = None  # a step _screened_step took and handed to the event path
        self._block_out_slices = []
        self._observer = None
        self._config = self._describe_config()
        self._start(new_integrator=False)

    @property
    def derivative_report(self):
        """How each derivative of the multibody protocol is computed, a list of
        ``{"term", "path", "note"}``: path "analytic" (the model gives it), "complex-step",
        "hyper-dual" or "differences" (:mod:`cosim.derivatives`, chosen per term at the
        first call), "constant"/"none" where it vanishes; None for first-order models.
        On the numba backend, a term whose kernel the model leaves out is generated
        (:mod:`cosim.models.auto_kernels`): path "complex-step", "complex-contour" or
        "differences" with " (compiled)" appended."""
        if self.model.kind != "multibody":
            return None
        compiled = {}
        if self.backend == "numba" and getattr(self.model, "kernel_set", None) is not None:
            from .models import auto_kernels
            compiled = auto_kernels.report(self.model)
        rows = []
        for t, p, n in derivatives.derivative_report(self.model):
            if t in compiled:
                p, n = compiled[t][0] + " (compiled)", compiled[t][1]
            rows.append({"term": t, "path": p, "note": n})
        return rows

    @property
    def backend_reason(self):
        """Why this run is on the Python backend (None on numba).  A multibody model
        without kernels runs there by measurement: the compiled core
        calling back into Python per kernel is faster per step but cannot be cached
        (``python benchmarks/user_model_callback.py``)."""
        if self.backend == "numba":
            return None
        if self.requested_backend == "python":
            return "the python backend was asked for"
        from .integrators import compiled_unavailable
        why = compiled_unavailable(self.method, self.model) or "the compiled twin cannot run it"
        if self.model.kind == "multibody" and getattr(self.model, "kernels", None) is None:
            why += ("; a compiled core calling back into its Python methods was measured "
                    "(benchmarks/user_model_callback.py; docs/known-gaps.md) and is not used: its "
                    "first call compiles for minutes in every process, for 1.0-1.6x per step")
        return why

    def _with_check_hint(self, exc, steps=None):
        """A failure at the start of a user model's run (within its first 20 steps, or
        before it got 1e-4 of the model's time scale past the start): point to the
        checker, naming the step count, the time and the last step size.  ``steps``: the
        integrator's step count at the failure (read before the state was restored; the
        first steps of a user model take the step-by-step path, which has it).  A
        failure that spent the step budget (cause "max_steps") is never one of them."""
        if steps is None:
            steps = self.integrator.stats.get("steps", 0)
        if not self.user_model or "cosim check" in str(exc) or exc.cause in ("max_steps", "fixed step") \
                or isinstance(exc, ConstraintViolationError):
            return exc
        scale = float(getattr(self.model, "time_scale", 1.0) or 1.0)
        near_start = exc.t is not None and exc.t - self.start_time <= 1e-4 * scale
        if not (steps <= 20 or near_start):
            return exc
        where = f"after {steps} steps" + (f", at t={exc.t!r}" if exc.t is not None else "") + \
            (f", last step size {exc.h!r}" if exc.h is not None else "")
        return type(exc)(f"{exc} — a failure at the start of a user model's run ({where}) often "
                         f"means a wrong derivative: {self.check_hint()}",
                         t=exc.t, h=exc.h, cause=exc.cause)

    def check_hint(self):
        """What a failure of a user model at its start tells the user to run."""
        cls = type(self.model)
        return f"run `cosim check {cls.__module__}:{cls.__qualname__}`"

    @classmethod
    def from_spec(cls, spec, allow_files=False, check=None, model=None):
        """The simulation a :class:`cosim.spec.SimulationSpec` describes (the CLI, scenario
        files and sweeps build theirs here).  ``allow_files``: load a ``file.py:Class``
        plant (only the command line, whose arguments the user typed, allows it).  Sine
        inputs marked ``exact`` on an LTI plant become signal generators appended to the
        plant (seed 001 §3.5, example 3.4).  ``model``: a model class or instance given in
        Python, used instead of loading the spec's model name."""
        from .errors import SpecError
        from .models import is_urdf_spec, model_class
        from .spec import thaw
        if model is None:
            model = spec.model_reference(allow_files)
            if isinstance(model, str) and is_urdf_spec(model):
                if not allow_files:  # a spec names a URDF {urdf: PATH} next to its file, or its text
                    model_class(model)  # raises: where a URDF file may be named
                from .models.urdf import load_urdf
                model = load_urdf(model)
        params = thaw(spec.params)
        method = spec.resolved_method(model)
        exact = {n: s for n, s in thaw(spec.inputs).items()
                 if isinstance(s, Mapping) and s.get("type") == "sine" and s.get("exact") is True}
        if exact:
            model, params = _augmented_plant(spec, model, params, exact), {}
        kwargs = {"rtol": 1e-6 if spec.rtol is None else spec.rtol,
                  "atol": 1e-8 if spec.atol is None else spec.atol}
        for key in ("event_tolerance", "on_chattering", "max_chattering_events", "max_ic_repair"):
            if getattr(spec, key) is not None:
                kwargs[key] = getattr(spec, key)
        sim = cls(model=model, method=method, params=params, h=spec.h,
                  method_options=thaw(spec.method_options), blocks=thaw(spec.blocks),
                  connections=thaw(spec.connections), start_time=spec.start_time,
                  backend=spec.backend, check=check, **kwargs)
        unknown = sorted(set(spec.inputs) - set(exact) - set(sim.input_names))
        if unknown:
            raise SpecError(f"inputs {unknown} are not external inputs of the simulation "
                            f"(external inputs: {', '.join(sim.input_names) or 'none'})")
        return sim

    # -- construction ------------------------------------------------------------------
    def _wire(self, connections):
        """Resolve connections into index maps (plant/block/external sources)."""
        model = self.model
        plant_out = {n: i for i, n in enumerate(model.output_names)}
        plant_in = {n: i for i, n in enumerate(model.input_names)}
        block_idx = {b.name: j for j, b in enumerate(self.blocks)}

        def source(name):
            base = name[6:] if name.startswith("plant.") else name
            if base in plant_out and (name.startswith("plant.") or "." not in name):
                return ("plant", plant_out[base])
            blk, dot, sig = name.partition(".")
            if dot and blk in block_idx and sig in self.blocks[block_idx[blk]].output_names:
                return ("block", block_idx[blk], self.blocks[block_idx[blk]].output_names.index(sig))
            raise InvalidInputError(
                f"connection source {name!r} is neither a plant output {list(model.output_names)} "
                f"nor a block output 'block.signal'")

        def destination(name):
            base = name[6:] if name.startswith("plant.") else name
            if base in plant_in and (name.startswith("plant.") or "." not in name):
                return ("plant", plant_in[base])
            blk, dot, sig = name.partition(".")
            if dot and blk in block_idx and sig in self.blocks[block_idx[blk]].input_names:
                return ("block", block_idx[blk], self.blocks[block_idx[blk]].input_names.index(sig))
            raise InvalidInputError(
                f"connection destination {name!r} is neither a plant input {list(model.input_names)} "
                f"nor a block input 'block.signal'")

        driven = {}
        self.connections = []
        for item in connections or ():
            src, dst = _parse_connection(item)
            s, d = source(src), destination(dst)
            if d in driven:
                raise InvalidInputError(f"destination {dst!r} is driven twice ({driven[d]!r} and {src!r})")
            driven[d] = src
            self.connections.append((src, dst, s, d))

        # external inputs: plant inputs and block inputs no connection drives
        ext_names, self._model_from_ext, self._model_from_block = [], [], []
        ext_defaults = []
        defaults = model.default_inputs()
        for i, name in enumerate(model.input_names):
            d = ("plant", i)
            if d in driven:
                s = next(c[2] for c in self.connections if c[3] == d)
                if s[0] != "block":
                    raise InvalidInputError(
                        f"plant input {name!r} can only be driven by a block output, got {driven[d]!r}")
                self._model_from_block.append((i, s[1], s[2]))
            else:
                self._model_from_ext.append((i, len(ext_names)))
                ext_names.append(name)
                ext_defaults.append(defaults[i])
        self._block_sources = []
        for j, b in enumerate(self.blocks):
            srcs = []
            for k, sig in enumerate(b.input_names):
                d = ("block", j, k)
                if d in driven:
                    srcs.append(next(c[2] for c in self.connections if c[3] == d))
                else:
                    srcs.append(("ext", len(ext_names)))
                    ext_names.append(f"{b.name}.{sig}")
                    ext_defaults.append(0.0)
            self._block_sources.append(srcs)
        self.input_names = tuple(ext_names)
        self._input_index = {n: i for i, n in enumerate(ext_names)}
        self._ext_defaults = np.array(ext_defaults, dtype=float)
        self._m_ext = np.array([i for i, _ in self._model_from_ext], dtype=int)
        self._e_ext = np.array([e for _, e in self._model_from_ext], dtype=int)
        self._inputs_identity = (not self._model_from_block and
                                 self._m_ext.tolist() == list(range(model.n_inputs)) and
                                 self._e_ext.tolist() == list(range(model.n_inputs)) and
                                 len(ext_names) == model.n_inputs)
        self.output_names = tuple(model.output_names) + tuple(
            f"{b.name}.{sig}" for b in self.blocks for sig in b.output_names)

    def _describe_config(self):
        cls = type(self.model)
        return {
            "model": self.model.name, "model_class": f"{cls.__module__}:{cls.__qualname__}",
            "kind": self.model.kind, "n_y": int(self.model.n_y), "method": self.method,
            "rtol": _plain(self.rtol), "atol": _plain(self.atol), "h": _plain(self.h),
            "method_options": _plain(self.method_options), "params": _plain(self._initial_params),
            "start_time": self.start_time, "blocks": [b.describe() for b in self.blocks],
            "connections": [[c[0], c[1]] for c in self.connections],
            "input_names": list(self.input_names), "output_names": list(self.output_names),
            "configuration": _plain(getattr(self.model, "configuration", None)),
            # what the model was built from (a URDF robot: SHA-256 of its text)
            "model_digest": getattr(self.model, "source_digest", None),
        }

    def _start(self, new_integrator=True):
        """(Re)initialise everything at start_time (used by __init__ and reset)."""
        for key, value in self._initial_params.items():
            if not _same(self.model.params[key], value):
                self.model.set_parameter(key, value)
        self._restore_block_parameters(self._initial_block_params)
        if new_integrator:
            self.integrator = make_integrator(self.model, self.method, rtol=self.rtol, atol=self.atol,
                                              h=self.h, backend=self.backend, **self.method_options)
        self._plain_set_inputs = type(self.integrator).set_inputs is Integrator.set_inputs
        # an adaptive run's tolerance is judged once per longer communication step
        # (cosim.step_budget; cosim.run and the FMU judge the whole run up front)
        self._tolerance_span = 0.0 if self.h is None and self.method != "state-transition" else math.inf
        self._set_budget_span()
        for b in self.blocks:
            b.reset()
        start = exact_time(self.start_time, "start_time", positive=False)
        self._clocks = [SampleClock(b.sample_time, b.offset, start) for b in self.blocks]
        self._u_ext = self._ext_defaults.copy()
        self._u = self._compose_inputs(self._u_ext)
        self._u_seen = self._u_list = None   # set_inputs' list of the held inputs (and of which)
        self._views = (None, None, None)      # y_view, q, v (_q_v)
        ic = {} if self.max_ic_repair is None or self.model.kind != "multibody" else \
            {"max_repair": self.max_ic_repair}
        # every model term once, overflow raised, shapes checked (issue 14)
        probe_model(self.model, self.start_time, self.model.initial_y(), self._u)
        self.integrator.initialize(self.start_time, u=self._u, **ic)
        self._integrator_lead = None
        report = getattr(self.integrator, "ic_report", None)
        if report is not None and report.deferred_constraints:
            self._leave_singular_start(report, ic)
        # the integrator may run elsewhere than planned (redundant constraints: python)
        self.backend = getattr(self.integrator, "backend", self.backend)
        self._plain_set_inputs = type(self.integrator).set_inputs is Integrator.set_inputs
        if hasattr(self.integrator.model, "rows") and self.method in constraint_guard.ADAPTIVE_ROWS:
            self.integrator.model.adaptive = True  # rows chosen anew inside the steps too
        constrained = (self.constraint_check != "off" and self.model.kind == "multibody"
                       and self.model.n_c > 0)
        # where a wrong answer with a plausible result is possible: a user model, a model
        # with constraints set aside (redundancy re-selected along the run), a singular
        # start, a method that only bounds the drift.  A library model on its full,
        # independent constraint set is enforced by the method and checked by the test
        # suite: "auto" leaves its steps unchecked (the check costs about as much as a
        # compiled step of a small model), "step" checks it too.
        at_risk = (self.user_model or hasattr(self.integrator.model, "rows")
                   or self._integrator_lead is not None
                   or self.method in constraint_guard.DRIFT_METHODS)
        self._guard = constrained and (at_risk or self.constraint_check == "step")
        # the FMU binary's own steps (native_step_record) cannot run the check
        self._guard_needs_python = self._guard
        self._drift_only = self.method in constraint_guard.DRIFT_METHODS
        # where the full check is left out (or only warns): a gross violation (a position
        # residual GROSS_FACTOR above the bound, or not finite) still fails the step, except
        # for the methods whose every accepted step solves C(q) = 0 (ENFORCING_METHODS)
        self._gross = constrained and (not self._guard or self._drift_only) and \
            self.method not in constraint_guard.ENFORCING_METHODS
        self._gross_setup()
        self._positions_only = self.method in constraint_guard.INDEX3_METHODS and \
            int(self.method_options.get("index", 3)) == 3
        # the first steps of a user model take the step-by-step path, which knows the step
        # count at a failure (the fast path's integrator restores itself before raising)
        self._early = self.user_model
        self._drift_warned = False
        # a fixed step's accuracy rule (cosim.fixed_step): the method's largest local error
        # estimate, read from its record after each communication step, warned about once
        self._fixed_slot = getattr(self.integrator, "fixed_error_slot", None)
        self._fixed_warn_at = fixed_step.WARN_FACTOR
        self._worst_residual = {"position": 0.0, "position_time": self.start_time,
                                "velocity": 0.0, "velocity_time": self.start_time,
                                "reselections": 0}
        self._time = self.start_time
        self._z = self._event_values()
        self._event_log = []
        self._log_tuple = None
        self._n_comm = 0
        self._n_events = 0
        self._stopped = False
        self._stop_time = None
        self._chatter = ChatterMonitor(self.max_chattering_events, self.chattering_window)
        self._refresh_input_limits()

    # -- names / read-only views ---------------------------------------------------------
    @property
    def ic_report(self):
        """What the initial-condition analysis did at the start (seed 000 Algorithm 1):
        a :class:`cosim.ic.ICReport` (``repaired``, ``position_change``,
        ``velocity_change``, ``redundant_constraints``, ``summary()``), None for
        first-order models.  A repair also issues an InitialConditionWarning."""
        return getattr(self.integrator, "ic_report", None)

    @property
    def time(self):
        return self._time

    @property
    def y(self):
        """The current state (``state_names`` order), a copy of it to keep; :attr:`y_view`,
        :attr:`q` and :attr:`v` read it without copying."""
        if self._integrator_lead is not None and self.integrator.t == self._integrator_lead[1]:
            return self._start_y.copy()  # left a singular start: the state at t0 itself
        y = self.integrator.y
        return y if self._y_copied else y.copy()

    @property
    def y_view(self):
        """The current state (``state_names`` order) as a read-only numpy view, no copy
        (``flags.writeable`` is False).  A view is valid until the simulation next
        changes (``do_step``, ``set_inputs``, ``set_state``, ``reset``,
        ``set_parameter``): read it again after each, or keep :attr:`y`, a copy."""
        if self._integrator_lead is not None and self.integrator.t == self._integrator_lead[1]:
            return self._start_view   # left a singular start: the state at t0 itself
        return self.integrator.y_view

    @property
    def q(self):
        """A multibody model's coordinates (``coordinate_names`` order): the first
        ``len(coordinate_names)`` entries of :attr:`y_view`, a read-only view valid until
        the simulation next changes (as :attr:`y_view`).  A first-order model has no
        coordinates: an InvalidInputError (its state is :attr:`y_view`)."""
        views = self._views
        return (views if views[0] is self.y_view else self._q_v())[1]

    @property
    def v(self):
        """A multibody model's velocities q' (``coordinate_names`` order): the entries
        of :attr:`y_view` after :attr:`q`, a read-only view valid until the simulation
        next changes.  A first-order model: an InvalidInputError, as :attr:`q`."""
        views = self._views
        return (views if views[0] is self.y_view else self._q_v())[2]

    def _q_v(self):
        """(y_view, q, v) made anew (y_view is a new view)."""
        if self.model.kind != "multibody":
            raise InvalidInputError(
                f"q and v are a multibody model's coordinates and velocities; model "
                f"{self.model.name!r} is first-order: read its state with y_view "
                f"(names in state_names)")
        y = self.y_view
        n = self.model.n_q
        self._views = (y, y[:n], y[n:2 * n])
        return self._views

    @property
    def state_names(self):
        return tuple(self.model.state_names)

    @property
    def coordinate_names(self):
        if self.model.kind == "multibody":
            return tuple(self.model.coordinates)
        return tuple(self.model.state_names)

    @property
    def parameter_names(self):
        return tuple(p.name for p in self.model.parameters)

    @property
    def base_step(self):
        """Exact multirate base step (gcd of the sample times) in seconds, or None."""
        return None if self._base_step is None else float(self._base_step)

    @property
    def base_step_exact(self):
        """The base step as a :class:`fractions.Fraction` (or None)."""
        return self._base_step

    @property
    def stopped(self):
        return self._stopped

    @property
    def stop_time(self):
        return self._stop_time

    @property
    def event_log(self):
        return [dict(e) for e in self._event_log]

    @property
    def stats(self):
        d = {k: int(v) for k, v in self.integrator.stats.items()}
        d["communication_steps"] = self._n_comm
        d["events"] = self._n_events
        return d

    @property
    def fixed_step_error(self):
        """The largest local error estimate of this simulation's fixed steps so far, in the
        tolerance weights (:mod:`cosim.fixed_step`; kept by the integrator, not part of a
        saved state); None when the run is adaptive or the method keeps none."""
        return getattr(self.integrator, "fixed_step_error", None)

    # -- inputs ------------------------------------------------------------------------------
    def _compose_inputs(self, u_ext):
        if self._inputs_identity:
            return u_ext.copy()
        u = np.empty(self.model.n_inputs)
        if self._m_ext.size:
            u[self._m_ext] = u_ext[self._e_ext]
        for i, j, k in self._model_from_block:
            u[i] = self.blocks[j].outputs[k]
        return u

    def set_inputs(self, values):
        """Hold new external input values from the current time on (ZOH): a mapping
        name -> value, or all of them as a sequence in ``input_names`` order.  A float
        numpy vector is the cheapest form (one pass checks it: a control loop's
        per-step call).  A rejected value (NaN/inf, the wrong length, beyond 1e12 in
        size) raises an InvalidInputError naming it, the held inputs unchanged; an
        input beyond a limit the model applies (a URDF effort limit) is clipped by the
        model and said once (:meth:`notice`)."""
        if type(values) is _NDARRAY and values.dtype is _F64 and values.ndim == 1 \
                and self._inputs_identity:
            # hot path (a control loop, an FMU/ROS step): a float vector, the model's inputs
            # are the external ones; the same checks as below in one pass over a list, one
            # copy, shared by _u_ext and _u (both are replaced, never written in place)
            # (a Euclidean norm within MAX_INPUT means every value is finite and within it;
            # a larger one, or a NaN/inf, goes the long way below, which names the value;
            # the same norm screens the effort limits in _hold_plant_inputs)
            lst = values.tolist()
            if len(lst) == len(self._u_ext):
                norm = _hypot(*lst)
                if norm <= MAX_INPUT:
                    new = values.copy()
                    if self._u_seen is not self._u:  # (the held inputs as a list, made once)
                        self._u_seen, self._u_list = self._u, self._u.tolist()
                    if lst != self._u_list:
                        self._hold_plant_inputs(new, lst, norm)
                        self._u_seen, self._u_list = new, lst
                    self._u_ext = new
                    return
        if type(values) is not np.ndarray and isinstance(values, Mapping):  # (an ABC check costs)
            new = self._u_ext.copy()
            for key, value in values.items():
                idx = self._input_index.get(key)
                if idx is None:
                    raise InvalidInputError(
                        f"unknown input {key!r} (inputs: {', '.join(self.input_names) or 'none'})")
                new[idx] = finite_float(f"input {key!r}", value, strict=True)
        else:
            try:  # fast path for a well-formed vector; errors are phrased by finite_vector
                if type(values) in (list, tuple):  # a few numbers: cheaper in Python than numpy
                    ok = len(values) == len(self._u_ext) and all(map(_real_finite, values))
                    new = np.array(values, dtype=float) if ok else None
                elif type(values) is np.ndarray and values.dtype == np.float64 and values.ndim == 1:
                    ok = len(values) == len(self._u_ext) and all(map(math.isfinite, values.tolist()))
                    new = values.copy()
                elif np.asarray(values).dtype.kind == "c":  # complex: refused (not its real part)
                    ok = False
                else:
                    new = np.array(values, dtype=float)
                    ok = new.shape == self._u_ext.shape and bool(np.isfinite(new).all())
            except (TypeError, ValueError):
                ok = False
            if not ok:
                new = finite_vector("inputs", values, len(self.input_names),
                                    item=lambda i: f"input {self.input_names[i]!r}")
        lst = new.tolist()
        norm = _hypot(*lst)
        if not norm <= MAX_INPUT:
            i = oversized_input(lst)
            if i is not None:
                raise InvalidInputError(f"input {self.input_names[i]!r} must be at most "
                                        f"{MAX_INPUT:g} in size, got {float(new[i])!r}")
        u = self._compose_inputs(new)
        if self._inputs_identity:
            if lst != self._u.tolist():
                self._hold_plant_inputs(u, lst, norm)
        elif u.tolist() != self._u.tolist():
            self._hold_plant_inputs(u)
        self._u_ext = new

    def _hold_plant_inputs(self, u, values=None, norm=None):
        """New plant inputs from now on: a discontinuity, the integrator restarts
        (``values``: ``u.tolist()``, ``norm``: its Euclidean norm, where the caller
        has them)."""
        integ = self.integrator
        hits = ()
        moves = self._has_events and (self._inputs_move_events is None or self._inputs_move_events())
        if moves:  # a switching function the new input moves across zero
            z_new, hits = self._input_crossings(u)
            snapshot = self.get_state() if hits else None
        if self._plain_set_inputs:  # Integrator.set_inputs minus re-validating checked values
            integ.hold_inputs(u)
        else:
            integ.set_inputs(u)
        self._u = u
        if moves:
            self._z = z_new
            if hits:  # an event at this instant (e.g. a load that pulls a joint off its stop)
                try:
                    self._jump(integ.t, [(i, 0) for i in hits])
                except BaseException:
                    self._apply_state(snapshot)
                    raise
        if self._limit_pairs:  # an input beyond the smallest limit: look closer
            if values is None:
                values = u.tolist()
            if norm is None:
                norm = _hypot(*values)
            if norm > self._limit_floor:   # (the norm bounds every value: most steps stop here)
                self._note_clipped_inputs(values)

    def _input_crossings(self, u):
        """(the switching functions at the integrator's point under new inputs ``u``, the
        indices of those the new inputs move across zero).  A model with a compiled
        screen (``quiet_step``, the stops of a URDF robot) is asked first, in one call:
        none is at or below zero, before or now, so none crossed (the holding stops'
        reactions included); else the values are compared one by one."""
        integ = self.integrator
        if self._screen is not None:
            kind = self._point_kind()
            if kind[1] == "record":
                S = integ._S
                quiet, z = self._screen(S, S, kind[3], 0.0, u, self._z)
                if quiet:
                    return z, ()
        z = event_values(self.model, integ.t, integ.y, u)
        return z, crossings(self._z, z, self._event_directions)

    def _refresh_input_limits(self):
        """The inputs the model clips and has not yet been said of (after a parameter
        change too): ``_limit_pairs`` and the smallest of their limits."""
        limits = () if self._input_limits is None else self._input_limits()
        self._limit_pairs = [x for x in limits if x[0] not in self._clipped_inputs]
        self._limit_floor = min((x[1] for x in self._limit_pairs), default=math.inf)

    def _note_clipped_inputs(self, values):
        """Say once per input that the model clips it (the model's ``input_limits()``:
        (input index, limit, what the limit is) for each limited input)."""
        floor = self._limit_floor
        if not (max(values) > floor or min(values) < -floor):
            return   # (all within the smallest limit: most steps whose norm is not)
        said = False   # (else nothing changed: values beyond the smallest limit only)
        for i, limit, what in self._limit_pairs:
            x = values[i]
            if x > limit or x < -limit:
                said = True
                self._clipped_inputs.add(i)
                self.notice(f"input {self.model.input_names[i]!r} = {x!r} is clipped to "
                            f"{math.copysign(limit, x)!r} by {what} (said once per input)")
        if said:
            self._refresh_input_limits()

    def notice(self, message):
        """Tell the user something once (an input clipped): ``on_notice(message)`` when an
        adapter set it (the ROS node's logger, the FMU's FMI logger), else an
        :class:`~cosim.errors.InputLimitWarning`."""
        if self.on_notice is not None:
            self.on_notice(message)
        else:
            warnings.warn(message, InputLimitWarning, stacklevel=5)  # the caller of set_inputs

    def get_inputs(self):
        """Current external input values in ``input_names`` order."""
        return self._u_ext.copy()

    # -- outputs -------------------------------------------------------------------------------
    def get_outputs(self):
        integ = self.integrator
        out = integ.fresh_outputs()  # computed by the compiled step at this state, or None
        if self._integrator_lead is not None and integ.t == self._integrator_lead[1]:
            out = np.asarray(self.model.output_values(self._time, self._start_y, self._u),
                             dtype=float).reshape(-1)
        if out is None:
            out = self.model.output_values(integ.t, integ.y, self._u)
            if not (type(out) is np.ndarray and out.dtype == np.float64 and out.ndim == 1):
                out = np.asarray(out, dtype=float).reshape(-1)
        if self.blocks:
            out = np.concatenate([out, *(b.outputs for b in self.blocks)])
        return out

    def outputs_into(self, out):
        """:meth:`get_outputs` written into ``out`` (a float vector of
        ``len(output_names)``, e.g. an adapter's shared buffer) without the
        intermediate array when the compiled step computed them."""
        if self.blocks or self._integrator_lead is not None or not self.integrator.outputs_into(out):
            out[:] = self.get_outputs()

    def outputs_at(self, t, y):
        """Outputs at (t, y) with the inputs and block outputs held now (dense recording)."""
        out = np.asarray(self.model.output_values(t, y, self._u), dtype=float).reshape(-1)
        if self.blocks:
            out = np.concatenate([out, *(b.outputs for b in self.blocks)])
        return out

    def get_output_dict(self):
        return dict(zip(self.output_names, self.get_outputs().tolist()))

    def constraint_residuals(self):
        """(position, velocity, acceleration) constraint residual norms; zeros for ODEs."""
        if self.model.kind != "multibody":
            return (0.0, 0.0, 0.0)
        integ = self.integrator
        pos, vel, acc = self.model.residual_levels(integ.t, integ.y, getattr(integ, "qdd", None))
        return (float(pos), float(vel), float(acc))

    # -- parameters ---------------------------------------------------------------------------
    def _block_parameter_values(self):
        values = {}
        for b in self.blocks:
            values.update({f"{b.name}.{k}": v for k, v in b.parameter_values().items()})
        return values

    def _restore_block_parameters(self, values):
        """Set the blocks' parameters to ``values`` ({"block.name": value}; absent: unchanged)."""
        by_block = {}
        for key, value in values.items():
            j, name = self._block_params[key]
            by_block.setdefault(j, {})[name] = value
        for j, vals in by_block.items():
            block = self.blocks[j]
            current = block.parameter_values()
            if any(not _same(current[k], v) for k, v in vals.items()):
                block.set_parameters(vals)

    def block_parameters(self):
        """The blocks' tunable parameters: a list of dicts ``name`` ("block.parameter"),
        ``value``, ``unit`` (the block's unit template resolved from its ``units`` and the
        plant signals it is connected to; None when unknown) and ``description``.  Set them
        with :meth:`set_parameter` at any time: they take effect at the block's next sample
        instant."""
        units = self._block_signal_units()
        out = []
        for j, b in enumerate(self.blocks):
            values = b.parameter_values()
            for p in b.parameters():
                out.append({"name": f"{b.name}.{p.name}", "value": values[p.name],
                            "unit": unit_expression(p.unit, units[j]) if p.unit else None,
                            "description": p.description})
        return out

    def _block_signal_units(self):
        """[{signal: unit}] per block: its declared ``units``, else the unit of the plant
        output feeding an input / of the plant input an output drives (a block output feeding
        another block's input gives its unit too); dimensionless "1"/"-" count as unknown."""
        model = self.model

        def known(unit):
            return unit if unit and unit not in ("1", "-") else None
        plant_in = {s.name: known(s.unit) for s in model.inputs}
        plant_out = {s.name: known(s.unit) for s in model.outputs}
        units = [dict(b.units) for b in self.blocks]
        for i, j, k in self._model_from_block:
            sig = self.blocks[j].output_names[k]
            if sig not in units[j] and plant_in.get(model.input_names[i]):
                units[j][sig] = plant_in[model.input_names[i]]
        for j, b in enumerate(self.blocks):
            for k, sig in enumerate(b.input_names):
                src = self._block_sources[j][k]
                if sig in units[j]:
                    continue
                if src[0] == "plant":
                    unit = plant_out.get(model.output_names[src[1]])
                elif src[0] == "block":
                    unit = units[src[1]].get(self.blocks[src[1]].output_names[src[2]])
                else:
                    unit = None
                if unit:
                    units[j][sig] = unit
        return units

    def set_parameter(self, name, value):
        """Change a model parameter or a block parameter (``"pd.kp"``, :meth:`block_parameters`).
        Before the first step any model parameter may change (the initial state is
        recomputed); afterwards only ``tunable`` ones, and the change is a discontinuity (the
        integrator restarts).  A block parameter may change at any time and takes effect at
        the block's next sample instant (its value before the first step is the one
        :meth:`reset` returns to)."""
        if name in self._block_params and name not in self.model.params:
            j, key = self._block_params[name]
            self.blocks[j].set_parameters({key: value})  # validated, all or nothing
            if self._n_comm == 0 and self._time == self.start_time:
                self._initial_block_params[name] = self.blocks[j].parameter_values()[key]
            return
        spec = {p.name: p for p in self.model.parameters}
        config_keys = tuple(getattr(self.model, "configuration", None) or ())
        if name not in spec and name not in config_keys:
            raise UnknownParameterError(
                f"model {self.model.name!r} has no parameter {name!r} "
                f"(parameters: {', '.join(list(spec) + list(config_keys)) or 'none'}"
                + (f"; block parameters: {', '.join(self._block_params)}" if self._block_params else "")
                + ")")
        at_start = self._n_comm == 0 and self._time == self.start_time
        if not at_start and (name not in spec or not spec[name].tunable):
            raise InvalidInputError(
                f"parameter {name!r} of model {self.model.name!r} is not tunable after the start")
        if at_start:
            if name in spec:
                old = self.model.params[name]
            else:
                old = self.model.configuration[name]
            self.model.set_parameter(name, value)
            if name in spec:
                self._initial_params[name] = self.model.params[name]
            try:
                u_ext = self._u_ext.copy()
                self._start(new_integrator=True)
                self.set_inputs(u_ext)
            except BaseException:
                self.model.set_parameter(name, old)
                if name in spec:
                    self._initial_params[name] = old
                self._start(new_integrator=True)
                raise
            self._config = self._describe_config()
            return
        old = self.model.params[name]
        snapshot = self.get_state() if self._has_events else None
        self.model.set_parameter(name, value)
        try:  # the new value must not overflow or make M singular at the current state
            probe_parameters(self.integrator.model, self.integrator.t, self.integrator.y,
                             self._u, "the current state")
        except BaseException:
            self.model.set_parameter(name, old)
            raise
        self.integrator.restart()
        z_old, self._z = self._z, self._event_values()
        self._refresh_input_limits()
        hits = crossings(z_old, self._z, self._event_directions) if self._has_events else ()
        if hits:  # the new value moves a switching function across zero: an event now
            try:
                self._jump(self.integrator.t, [(i, 0) for i in hits])
            except BaseException:
                self._apply_state(snapshot)
                raise

    # -- constraints along the run (cosim.constraint_guard) ------------------------------------
    def _leave_singular_start(self, report, ic):
        """The start is a singular configuration (C_q has a higher rank at nearby
        consistent configurations, cosim.ic.nearby_rank): constraints the IC analysis
        dropped here are not redundant.  Leave the singular point along the Taylor
        expansion q0 + τ v0 + τ²/2 q''0 (q''0 from the full set by its independent rows,
        cosim.ic.least_squares_accelerations) and start the integrator at t0 + τ on all
        the constraints the rank there allows (projected onto them).  τ = 1e-5 time
        scales (1e-4, 1e-3 if the rank is still short).  The first communication step
        then starts at t0 with the integrator at t0 + τ."""
        from .ic import independent_constraints, least_squares_accelerations, nearby_rank
        full, t0 = self.model, self.start_time
        q0, v0 = report.q, report.v
        near = nearby_rank(full, q0, t0)
        if near is None:
            return
        try:
            a0, _ = least_squares_accelerations(full, t0, q0, v0, self._u)
        except CosimError:
            return
        scale = float(getattr(full, "time_scale", 1.0) or 1.0)
        for tau in (1e-5 * scale, 1e-4 * scale, 1e-3 * scale):
            q = q0 + tau * v0 + 0.5 * tau * tau * a0
            if independent_constraints(np.asarray(full.constraint_jacobian(q, t0 + tau),
                                                  dtype=float)).size >= near.size:
                break
        else:
            return  # at rest in the singular configuration: the step check guards the run
        integ = make_integrator(full, self.method, rtol=self.rtol, atol=self.atol, h=self.h,
                                backend=self.backend, **self.method_options)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the projection's change is O(τ²): said below
            integ.initialize(t0 + tau, y0=np.concatenate([q, v0 + tau * a0]), u=self._u, **ic)
        note = (f"the run leaves the singular start along its Taylor expansion to t = "
                f"{t0 + tau!r} and continues on the constraints "
                f"{', '.join(report.deferred_constraints)} too")
        report.warnings.append(note)
        integ.ic_report = report
        self.integrator = integ
        self._set_budget_span()
        self._integrator_lead = (t0, float(integ.t))
        self._start_y = np.concatenate([q0, v0])
        self._start_view = self._start_y.view()
        self._start_view.flags.writeable = False

    @property
    def constraint_residual_report(self):
        """The largest constraint residuals (full set) at the ends of the communication
        steps so far: ``position``/``velocity`` and when (``*_time``), ``reselections``
        (times the independent subset of a model with redundant constraints was chosen
        anew), ``position_bound``/``velocity_bound`` at the current state, ``exceeded``
        (a drift-bounding method went above them); None for a model without constraints
        or with ``constraint_check="off"``."""
        if not getattr(self, "_guard", False):
            return None
        d = dict(self._worst_residual)
        d["reselections"] += int(getattr(self.integrator.model, "reselections", 0))
        q, v = self.model.split(self.integrator.y)
        d["position_bound"], d["velocity_bound"] = constraint_guard.bounds(
            self.rtol, self.atol, q, v, self._positions_only)
        d["exceeded"] = bool(self._drift_warned)
        return d

    def _check_constraints(self, t, h):
        """After a communication step: the full constraint set against the bounds
        (cosim.constraint_guard); raise ConstraintViolationError (the caller restores the
        state) or, for drift-bounding methods, warn once.  Then re-select the independent
        rows of a model with redundant constraints where the kept ones lose rank."""
        integ = self.integrator
        model = self.model
        t_end = float(integ.t)
        q, v = model.split(integ.y)
        pos, i, vel, j, Cq = constraint_guard.residuals(model, t_end, q, v)
        bp, bv = constraint_guard.bounds(self.rtol, self.atol, q, v, self._positions_only)
        if not (pos <= bp and vel <= bv):  # NaN: fails too
            if not pos / bp < vel / bv:
                what = (f"constraint {model.constraint_names[i]!r} is violated at t={t_end!r}: "
                        f"|C| = {pos:.3e} > {bp:.3e}")
            else:
                what = (f"the velocity constraint of {model.constraint_names[j]!r} is violated at "
                        f"t={t_end!r}: |C_q v + C_t| = {vel:.3e} > {bv:.3e}")
            bound = (f"the bound derived from rtol={self.rtol!r} and atol={self.atol!r}; "
                     f"'Constraints along the run' in the docs")
            if self._drift_only:
                gross = constraint_guard.gross_bound(self.rtol, self.atol, q)
                if not pos <= gross:
                    raise self._gross_error(pos, i, gross, t, h, t_end)
                self._note_residual(pos, vel, t_end)
                if not self._drift_warned:
                    self._drift_warned = True
                    msg = (f"{self.method} only bounds the constraint drift: {what} ({bound}); "
                           f"said once, the worst residual is in the run's summary "
                           f"(Simulation.constraint_residual_report)")
                    if self.on_notice is not None:
                        self.on_notice(msg)
                    else:
                        warnings.warn(msg, ConstraintDriftWarning, stacklevel=3)
                return
            rows = getattr(integ.model, "rows", None)
            aside = [] if rows is None else [model.constraint_names[k] for k in range(model.n_c)
                                             if k not in set(rows.tolist())]
            hint = (f"; {', '.join(aside)} are the constraints the integrator sets aside as "
                    f"redundant" if aside else "")
            raise ConstraintViolationError(
                f"{self.method}: {what} ({bound}): the result would be wrong, so do_step({t!r}, "
                f"{h!r}) failed and the state is unchanged{hint}; a smaller communication step, "
                f"a tighter rtol or another method (bdf) may pass it", t=t_end, h=h,
                cause="constraint residual")
        self._note_residual(pos, vel, t_end)
        rows = getattr(integ.model, "rows", None)
        if rows is not None:
            better = constraint_guard.better_rows(Cq, rows)
            if better is not None:
                integ.model.select(better)
                try:
                    integ.reset_point(integ.t, integ.y)  # multipliers of the new rows; restart
                except BaseException:
                    integ.model.select(rows)
                    raise
                self._worst_residual["reselections"] += 1

    def _gross_setup(self):
        """What the step check and its rollback need, found once: the record snapshot of a
        record-based method (its arrays and flags: a few µs, where ``state()`` costs tens),
        and for the gross check the model's constraint kernel as compiled for the method
        (cosim.jit) with its output buffer and the smallest gross bound (s_q = 1), so a
        step well inside it costs one compiled call."""
        from .integrators.record import RecordIntegrator
        integ = self.integrator
        self._has_rows = hasattr(integ.model, "rows")
        self._record_snapshot = isinstance(integ, RecordIntegrator) and hasattr(integ, "_S")
        # the integrator's y is a fresh copy already (a record's): y hands it on
        self._y_copied = getattr(getattr(type(integ), "y", None), "fget", None) is not None \
            and getattr(type(integ).y.fget, "returns_copy", False)
        self._gross_fn = None
        if self._gross:
            if (getattr(integ, "backend", None) == "numba" and integ.model is self.model
                    and self._record_snapshot):
                self._gross_fn = constraint_guard.compiled_constraints(self.model)
            self._gross_C = np.zeros(self.model.n_c)
            self._gross_floor = constraint_guard.gross_bound(self.rtol, self.atol, np.zeros(1))

    def _check_gross(self, t, h):
        """After a communication step the full check leaves out (cosim.constraint_guard):
        the position residual on the full set against the gross bound; NaN fails too."""
        integ = self.integrator
        fn = self._gross_fn
        if fn is not None:  # a compiled record method: its y and t read in place
            S = integ._S
            start = integ.y_start
            C = self._gross_C
            fn(S[start:start + self.model.n_q], S[integ._kernel.T], self.model._p, C)
            values = C.tolist()
            if max(map(abs, values)) <= self._gross_floor and sum(values) == sum(values):
                return  # well inside (NaN anywhere: the sum is NaN)
        t_end = float(integ.t)
        q = integ.y[:self.model.n_q]
        pos, i = constraint_guard.position_residual(self.model, t_end, q)
        bound = constraint_guard.gross_bound(self.rtol, self.atol, q)
        if not pos <= bound:
            raise self._gross_error(pos, i, bound, t, h, t_end)

    def _gross_error(self, pos, i, bound, t, h, t_end):
        step = f"fixed step h={self.h!r}" if self.h is not None else "step"
        return ConstraintViolationError(
            f"{self.method}: the {step} ended far off the constraints: constraint "
            f"{self.model.constraint_names[i]!r} has |C| = {pos:.3e} at t={t_end!r}, above "
            f"{bound:.3e} ({constraint_guard.GROSS_FACTOR:g} times the bound derived from "
            f"rtol={self.rtol!r} and atol={self.atol!r}): the result would be wrong, so "
            f"do_step({t!r}, {h!r}) failed and the state is unchanged; a smaller step or "
            f"another method may pass it", t=t_end, h=h, cause="constraint residual")

    def _snapshot_integrator(self):
        """What the fast path of do_step needs to undo a step the constraint check
        rejects: the integrator's point (a record-based method's ``save_point``: copies
        of its arrays, a few µs; else ``state()``) and the kept rows."""
        integ = self.integrator
        rows = self._rows_state().get("constraint_rows") if self._has_rows else None
        return rows, integ.save_point() if self._record_snapshot else integ.state()

    def _rollback_integrator(self, saved):
        integ = self.integrator
        rows, point = saved
        if rows is not None:
            integ.model.select(rows)
        if self._record_snapshot:
            integ.back_to(point)
        else:
            integ.restore(point)

    def _note_residual(self, pos, vel, t):
        w = self._worst_residual
        if pos > w["position"]:
            w["position"], w["position_time"] = pos, t
        if vel > w["velocity"]:
            w["velocity"], w["velocity_time"] = vel, t

    # -- stepping -----------------------------------------------------------------------------
    def _set_budget_span(self):
        """do_step's threshold: a longer communication step is checked first (the
        fixed step's count, and the tolerance once per new longest step)."""
        self._budget_span = min(self.integrator.budget_free_span(), self._tolerance_span)

    def tolerance_judged(self, dt, steps=None):
        """:func:`cosim.step_budget.check` judged communication steps up to ``dt``
        (``steps``: its estimate for one of them): do_step does not judge them again,
        nor steps up to where half of ``max_steps`` would be spent."""
        span = dt
        if steps is not None and 0.0 < steps < math.inf:
            span = dt * max(1.0, 0.5 * self.integrator.max_steps / steps)
        self._tolerance_span = max(self._tolerance_span, span)
        self._set_budget_span()

    def _check_step_budget(self, t_end, h):
        """A communication step longer than any judged so far: refused at once when the
        fixed step needs more than ``max_steps`` steps for it, or when the method's
        estimate at this tolerance does (:func:`cosim.step_budget.check`, with the
        estimate and a cheaper method) — for a loop of do_step, an FMU without a stopTime
        and a ROS node without an end time, whose end is not known up front."""
        self.integrator.check_step_budget(t_end)
        # (a user model's first steps go the checked way, whose failure names what is wrong
        # with the model: judged after them, not from a probe of a broken model)
        if h > self._tolerance_span and not self._early:
            from . import step_budget  # noqa: PLC0415
            step_budget.check(self, t_end, h, driven=bool(self.blocks or self.model.n_inputs))

    def do_step(self, t, h, observer=None):
        """Advance from ``t`` (= ``self.time``) to ``t + h``, landing exactly there.

        Returns the new communication time.  On error the simulation is exactly
        as before the call.  ``observer(integrator)``, if given, is called after
        every accepted integrator step that the result keeps (not after a step
        rolled back onto an event), while ``integrator.dense_output`` covers
        [t_prev, t] with the inputs of that step held: :mod:`cosim.run` records
        from it without making the integrator land on output points.
        """
        if not (type(h) is float and type(t) is float and 0.0 < h < _INF and -_INF < t < _INF):
            h = finite_float("communication step h", h, positive=True, strict=True)
            t = finite_float("communication time t", t, strict=True)
        now = self._time
        if t != now and abs(t - now) > _TIME_MATCH * max(1.0, abs(now)):
            raise InvalidInputError(f"do_step at t={t!r} but the simulation is at t={now!r}")
        t_end = t + h
        if not t_end > now:
            raise InvalidInputError(f"communication step h={h!r} is too small at t={t!r}")
        if self._stopped:  # terminal event happened: state frozen, time moves on
            self._time = t_end
            self._n_comm += 1
            return t_end
        if h > self._budget_span:
            self._check_step_budget(t_end, h)
        if self._early and self.integrator.stats.get("steps", 0) > 20:
            self._early = False
        if self._screen is not None and observer is None and not self._guard \
                and self._screened_step(t_end):
            self._time = t_end
            self._n_comm += 1
            if self._fixed_slot is not None and self.integrator._S[self._fixed_slot] > self._fixed_warn_at:
                self._warn_fixed_step(h)
            return t_end
        if self._fast and observer is None and not self._early:
            integ = self.integrator
            saved = self._snapshot_integrator() if self._guard or self._gross else None
            try:
                integ._advance_checked(t_end)  # t_end and the budget checked above; restores itself on failure
                if saved is not None:
                    if self._guard:
                        self._check_constraints(t, h)
                    else:
                        self._check_gross(t, h)
            except BaseException as exc:
                if saved is not None:
                    self._rollback_integrator(saved)
                if isinstance(exc, ConvergenceError):
                    hinted = self._with_check_hint(exc)
                    if hinted is not exc:
                        raise hinted from exc
                if isinstance(exc, CosimError) or not isinstance(exc, Exception):
                    raise
                raise ConvergenceError(f"do_step({t!r}, {h!r}) failed: {exc!r}", t=t, h=h,
                                       cause=exc) from exc
            self._time = t_end
            self._n_comm += 1
            if self._fixed_slot is not None and integ._S[self._fixed_slot] > self._fixed_warn_at:
                self._warn_fixed_step(h)
            return t_end
        taken = self._taken   # (the point before it: the rollback point's integrator)
        snapshot = self._rollback_point() if taken is None else self._snapshot(taken[0])
        self._steps_left = self.integrator.max_steps
        self._observer = observer
        try:
            self._run_until(t_end)
            if self._guard and not self._stopped:
                self._check_constraints(t, h)
            elif self._gross and not self._stopped:
                self._check_gross(t, h)
        except BaseException as exc:
            self._observer = self._taken = None
            steps = self.integrator.stats.get("steps", 0)
            self._apply_state(snapshot)
            if isinstance(exc, ConvergenceError):
                hinted = self._with_check_hint(exc, steps)
                if hinted is not exc:
                    raise hinted from exc
            if isinstance(exc, CosimError) or not isinstance(exc, Exception):
                raise
            raise ConvergenceError(f"do_step({t!r}, {h!r}) failed: {exc!r}", t=t, h=h,
                                   cause=exc) from exc
        self._observer = None
        self._time = t_end
        self._n_comm += 1
        if self._fixed_slot is not None and self.integrator._S[self._fixed_slot] > self._fixed_warn_at:
            self._warn_fixed_step(h)
        return t_end

    def _warn_fixed_step(self, dt=None):
        """The one warning of a fixed-step run whose local error estimate went beyond
        the tolerance weights by fixed_step.WARN_FACTOR (cosim.fixed_step); ``dt``: the
        communication step during which it did (its steps were at most that long)."""
        self._fixed_warn_at = math.inf
        integ = self.integrator
        msg = fixed_step.warning_text(self.method, integ.fixed_step_size, integ.fixed_step_error,
                                      self.rtol, self.atol, integ.fixed_error_order,
                                      integ.fixed_step_alternative, step=dt)
        if self.on_notice is not None:
            self.on_notice(msg)
        else:
            warnings.warn(msg, FixedStepAccuracyWarning, stacklevel=3)

    def _screened_step(self, t_end):
        """The fast path for a model whose events ``model.quiet_step`` can rule out
        (the stops of a URDF robot): one compiled advance to t_end, then the check;
        True when the step stands (the switching functions at t_end kept).  False,
        with the integrator as before, when the check does not clear the step, the
        advance took more than one integrator step (the check covers one; longer
        communication steps then go to the event path at once) or it failed:
        do_step then takes the step on the event path, which checks every
        integrator step and locates the event (or raises as it does).  A single
        step whose check found a sign change is kept for the event path
        (``_taken``: the point before it and the switching functions at its end),
        which locates the event on it instead of taking it again."""
        t0 = self._time
        if t_end - t0 > self._screen_span:
            self._screen_retry -= 1
            if self._screen_retry > 0:
                return False
            self._screen_span = math.inf  # try again now and then (an adaptive step grows)
        integ = self.integrator
        kind = self._point_kind()
        record = kind[1] == "record"
        if record:
            saved = integ.save_point()
        elif kind[1] == "rows":
            return False
        else:
            saved = integ.state()
        single, z = False, None
        try:
            integ._advance_checked(t_end)  # the step budget checked by do_step
            if record:
                S = integ._S
                single = S[kind[2]] == t0
                x1, x0, start = S, saved[0], kind[3]
            else:
                single = integ.t_prev == t0
                x1, x0, start = np.asarray(integ.y, dtype=float), np.asarray(saved["y"], dtype=float), 0
            if single:
                quiet, z = self._screen(x1, x0, start, t_end - t0, self._u, self._z)
            else:  # more than one integrator step
                self._screen_span = min(self._screen_span, 0.5 * (t_end - t0))
                self._screen_retry = 100
                quiet = False
        except Exception:  # noqa: BLE001 - the event path repeats the step and reports it
            quiet, z = False, None
        if quiet:
            self._z = z
            return True
        if single and z is not None:
            self._taken = (saved, z.copy())   # (the model reuses its buffer)
            return False
        self._back_to(saved)
        return False

    def _point_kind(self):
        """How the screened paths save the integrator's point: ``(integrator, kind,
        slot of t_prev in S, start of y in S)``, kind "record" (a method run by one
        kernel entry, cosim.integrators.record: ``save_point``/``back_to``), "state"
        (``state()``/``restore``) or "rows" (constraint rows chosen along the run:
        not screened)."""
        kind = self._screen_kind
        if kind is not None and kind[0] is self.integrator:
            return kind
        from .integrators.record import RecordIntegrator  # noqa: PLC0415
        integ = self.integrator
        record = isinstance(integ, RecordIntegrator)
        self._screen_kind = (
            integ, "rows" if hasattr(integ.model, "rows") else "record" if record else "state",
            integ._kernel.T_PREV if record else -1, integ.y_start if record else 0)
        return self._screen_kind

    def _save_point(self):
        """The integrator's point, to go back to with :meth:`_back_to`."""
        integ = self.integrator
        return integ.save_point() if self._point_kind()[1] == "record" else integ.state()

    def _back_to(self, saved):
        if type(saved) is tuple:
            self.integrator.back_to(saved)
        else:
            self.integrator.restore(saved)

    # -- a caller that steps without Python (the FMU binary) ----------------------------------
    def native_step_record(self):
        """The integrator's :meth:`native_step_record` when one communication step
        is exactly one compiled advance (no blocks, events or observer; the
        model's inputs are the external ones; the integrator at this time), else
        None.  The held inputs become one private array (``_u`` = ``_u_ext`` =
        the integrator's, as :meth:`set_inputs`' hot path shares them) that the
        caller writes in place; it then reports its steps to
        :meth:`native_steps_done` before anything else uses this simulation.
        Also returns the span below which :meth:`do_step` skips the step-budget
        check and do_step's relative time match.  None too while an input the model
        clips has not been said of yet (a URDF robot's effort limits): the caller's
        new inputs would not reach :meth:`set_inputs`, which says it."""
        integ = self.integrator
        record = getattr(integ, "native_step_record", None)
        if not (record is not None and self._fast and self._inputs_identity and not self._stopped
                and integ.t == self._time and not self._guard_needs_python
                and not self._limit_pairs):
            return None
        u = np.array(self._u, dtype=float)  # private: nobody else holds it
        integ.u = u
        self._u = self._u_ext = u
        rec = record()
        if rec is None:
            return None
        return rec + (self._budget_span, _TIME_MATCH)

    def native_steps_done(self, n_steps):
        """``n_steps`` communication steps taken by the caller of
        :meth:`native_step_record` since: time and step count catch up."""
        self._time = float(self.integrator.t)
        self._n_comm += int(n_steps)
        if self._fixed_slot is not None and self.integrator._S[self._fixed_slot] > self._fixed_warn_at:
            self._warn_fixed_step()   # the binary's steps kept the estimate in the record

    def _time_tol(self, t):
        """Sample instants this close to a communication point coincide with it."""
        return max(self._grid_tol, 16.0 * _EPS * max(1.0, abs(t)))

    def _run_until(self, t_end):
        integ = self.integrator
        tol = self._time_tol(t_end)
        clocks = self._clocks
        while not self._stopped:
            if clocks:
                self._fire_due_blocks(integ.t + tol)
                if self._stopped:
                    break
                t_next = min(c.next_time for c in clocks)
            else:
                t_next = math.inf
            target = t_next if t_next < t_end - tol else t_end
            self._integrate(target)
            if target == t_end:
                break

    def _fire_due_blocks(self, t_due):
        """Execute the blocks whose sample instant is <= t_due (module docstring)."""
        due = [j for j, c in enumerate(self._clocks) if c.next_time <= t_due]
        if not due:
            return
        integ = self.integrator
        plant_out = np.asarray(self.model.output_values(integ.t, integ.y, self._u), dtype=float).reshape(-1)
        for j in due:
            block, clock = self.blocks[j], self._clocks[j]
            u_b = np.array([plant_out[s[1]] if s[0] == "plant" else
                            self.blocks[s[1]].outputs[s[2]] if s[0] == "block" else
                            self._u_ext[s[1]] for s in self._block_sources[j]], dtype=float)
            t_s = clock.next_time
            try:
                block.update(t_s, u_b)
            except StopSimulation as stop:
                clock.advance()
                self._log({"time": integ.t, "name": block.name, "kind": "time",
                           "terminal": True, "reason": str(stop.reason)})
                self._stop(integ.t, block.name)
                break
            clock.advance()
        u = self._compose_inputs(self._u_ext)
        if u.tolist() != self._u.tolist():
            self._hold_plant_inputs(u)  # ZOH discontinuity: restart

    def _event_values(self):
        if not self._has_events:
            return np.zeros(0)
        integ = self.integrator
        return event_values(self.model, integ.t, integ.y, self._u)

    def _integrate(self, target):
        integ = self.integrator
        if not self._has_events:
            # do_step holds a snapshot of everything: no second one (advance() would take it)
            observer = self._observer
            while integ.t < target:
                self._count_step(target)
                integ.step(target)
                if observer is not None:
                    observer(integ)
            return
        model, u = self.model, self._u
        screen = self._screen
        while (integ.t < target or self._taken is not None) and not self._stopped:
            self._count_step(target)
            z_old, taken = self._z, self._taken
            if taken is not None:  # the step do_step's screen took and did not clear
                self._taken = None
                saved, z_new = taken
            else:
                saved = self._save_point() if screen is not None else integ.state()
                integ.step(target)
            if taken is None and screen is not None:  # the model's check rules most steps out at once
                if type(saved) is tuple:
                    x1, x0, start = integ._S, saved[0], self._screen_kind[3]
                else:
                    x1, x0, start = integ.y, np.asarray(saved["y"], dtype=float), 0
                quiet, z_new = screen(x1, x0, start, integ.t - integ.t_prev, u, z_old)
                if quiet:
                    self._z = z_new
                    self._observe(integ)
                    continue
                z_new = z_new.copy()  # (the model reuses its buffer)
            elif taken is None:
                z_new = event_values(model, integ.t, integ.y, u)
            hits = crossings(z_old, z_new, self._event_directions)
            starting_at_zero = not hits and bool((z_old == 0.0).any())
            if not hits and not starting_at_zero:
                self._z = z_new
                self._observe(integ)
                continue
            t_a, t_b = integ.t_prev, integ.t
            tol = max(self.event_tolerance, 4.0 * _EPS * max(1.0, abs(t_b)))

            dense = integ.step_interpolant()   # (the step's dense output, its record read once)
            component = getattr(dense, "component", None)

            linear = {}   # event_coordinate(i) of the functions looked at (the mode is the step's)

            def z_at(tt, i):
                lin = linear.get(i, False)
                if lin is False:
                    lin = linear[i] = model.event_coordinate(i)
                if lin is None:
                    return event_values(model, tt, dense(tt), u)[i]
                # z_i = ±(y_j − c) (a position stop): the dense output of y_j alone
                j, c, sign = lin
                y_j = component(tt, j) if component is not None else float(dense(tt)[j])
                return y_j - c if sign > 0.0 else c - y_j

            starts = {i: (t_a, z_old[i]) for i in hits}
            immediate = []
            # a switching function that starts the step exactly at zero (just after a
            # jump, e.g. a ball leaving the ground): its sign is the one just after t_a;
            # if it does not leave zero towards the pre-event side but ends the step on
            # the post-event side, the event recurs at once (counted for chattering)
            for i in np.flatnonzero(z_old == 0.0).tolist():
                if i not in starts and z_new[i] != 0.0:
                    t_d = t_a + min(tol, 0.5 * (t_b - t_a))
                    z_d = z_at(t_d, i)
                    direction = self._event_directions[i]
                    if crossed(z_d, z_new[i], direction):
                        starts[i] = (t_d, z_d)
                    elif direction * z_new[i] > 0.0 and direction * z_d >= 0.0:
                        immediate.append(i)
            if not starts and not immediate:
                self._z = z_new
                self._observe(integ)
                continue
            # locate every crossing on the dense output of this step (seed 001 §3.7)
            located = [(t_a, i, 0) for i in immediate]
            for i, (t_start, z_start) in sorted(starts.items()):
                t_i, _, iters = locate(lambda tt, i=i: z_at(tt, i), t_start, z_start, t_b, z_new[i], tol)
                located.append((t_i, i, iters))
            t_ev = float(min(x[0] for x in located))
            firing = sorted((i, it) for t_i, i, it in located if t_i <= t_ev + tol)
            # roll back and land exactly on the event: no step crosses it
            self._back_to(saved)
            if t_ev > integ.t and self._observer is None:
                integ.advance(t_ev)
            while integ.t < t_ev:  # the same steps as advance(), each one observed
                self._count_step(t_ev)
                integ.step(t_ev)
                self._observe(integ)
            if self._jump(t_ev, firing):
                return

    def _jump(self, t_ev, firing):
        """Apply the jump maps of the events ``firing`` ((index, iterations), in index
        order) at the integrator's time t_ev, log them, restart; True when one is
        terminal (the simulation stops)."""
        integ, model, u = self.integrator, self.model, self._u
        y = integ.y.copy()
        n_y = y.size   # (the model's n_y, which builds its state names)
        terminal = False
        y = np.asarray(model.apply_events([i for i, _ in firing], t_ev, y, u), dtype=float)
        derivatives.forget(model)  # a jump map may switch the constraints (same q, t)
        for i, iters in firing:
            ev = model.events[i]
            self._log({"time": t_ev, "name": ev.name, "kind": "state", "index": i,
                       "terminal": bool(ev.terminal), "iterations": int(iters)})
            terminal = terminal or bool(ev.terminal)
            if self._chatter.add(t_ev):
                self._chattering(t_ev, ev.name)
        if y.shape != (n_y,) or not np.all(np.isfinite(y)):
            raise InvalidInputError(f"jump map of event {model.events[firing[0][0]].name!r} "
                                    f"returned an invalid state {y!r}")
        integ.reset_point(t_ev, y)
        self._z = event_values(model, t_ev, integ.y, u)
        if terminal:
            self._stop(t_ev, ", ".join(model.events[i].name for i, _ in firing))
        return terminal

    def _observe(self, integ):
        if self._observer is not None:
            self._observer(integ)

    def _count_step(self, target):
        self._steps_left -= 1
        if self._steps_left < 0:
            self.integrator.too_many_steps(target)

    def _log(self, entry, count=True):
        self._event_log.append(entry)
        if len(self._event_log) > MAX_EVENT_LOG:  # bounded memory: keep the newest entries
            del self._event_log[:len(self._event_log) - MAX_EVENT_LOG]
        self._log_tuple = None
        if count:
            self._n_events += 1

    def _event_log_snapshot(self):
        # the log only grows between snapshots: reuse the tuple until it changes
        if self._log_tuple is None:
            self._log_tuple = tuple(self._event_log)
        return self._log_tuple

    def _stop(self, t, cause):
        self._stopped = True
        self._stop_time = t
        self._log({"time": t, "name": "stop", "kind": "stop", "cause": cause}, count=False)

    def _chattering(self, t, name):
        msg = (f"chattering: {self._chatter.count} events within {self.chattering_window:g} s "
               f"of each other at t={t!r} (last: {name!r})")
        if self.on_chattering == "error":
            raise ChatteringError(msg)
        self._log({"time": t, "name": name, "kind": "chattering", "message": msg}, count=False)
        self._stop(t, "chattering")

    # -- state --------------------------------------------------------------------------------
    def get_state(self):
        """In-memory snapshot (independent of later changes; cheap)."""
        return self._snapshot(self.integrator.state())

    def _rollback_point(self):
        """:meth:`get_state` for do_step's failure path (:meth:`_apply_state`); for a
        screened model (no blocks: nothing changes the integrator's inputs within a
        step, which its point does not keep) the integrator's point as
        :meth:`_save_point` keeps it (copies of its record, cheaper than its state
        dictionary)."""
        if self._screen is None:
            return self.get_state()
        return self._snapshot(self._save_point())

    def _snapshot(self, integrator_state):
        return {
            "time": self._time,
            "integrator": integrator_state,
            "u_ext": self._u_ext.copy(),
            "u": self._u.copy(),
            "blocks": [b.state() for b in self.blocks],
            "clocks": [c.next_index for c in self._clocks],
            "z": self._z.copy(),
            "event_log": self._event_log_snapshot(),
            "communication_steps": self._n_comm,
            "events": self._n_events,
            "stopped": self._stopped,
            "stop_time": self._stop_time,
            "chatter": self._chatter.state(),
            "params": dict(self.model.params, **self._block_parameter_values()),
            **self._rows_state(),
        }

    def _rows_state(self):
        """{"constraint_rows": [...]}: the full set's rows the integrator works on, for a
        model with redundant constraints (re-selected along the run); else {}."""
        rows = getattr(self.integrator.model, "rows", None)
        return {} if rows is None else {"constraint_rows": [int(i) for i in rows]}

    def set_state(self, state):
        """Restore a snapshot from :meth:`get_state` (rollback)."""
        self._check_state(state)
        previous = self.get_state()
        changed = {k: v for k, v in state["params"].items()
                   if k in self.model.params and not _same(self.model.params[k], v)}
        try:
            self._apply_state(state)
            if changed:
                self._check_restored_parameters(changed)
            self._check_restored_constraints(state)
            # q'' and λ (and a BDF history's) solve the equations with the state's parameters
            check_solved_points(self.integrator, state["integrator"])
        except BaseException as exc:
            self._apply_state(previous)
            if isinstance(exc, CosimError) or not isinstance(exc, Exception):
                raise
            raise StateError(f"cannot restore the state: {exc!r}") from exc

    def _check_restored_parameters(self, changed):
        """The parameter values a restored state brings (``changed``, already range-checked
        by the schema) pass the check a tunable change passes (cosim.model_probe) at the
        restored state: else StateError naming them, and set_state puts the previous
        state back."""
        integ = self.integrator
        try:
            probe_parameters(integ.model, float(integ.t), integ.y, self._u, "the restored state")
        except CosimError as exc:
            raise StateError(f"state field params: {', '.join(f'{k}={v!r}' for k, v in changed.items())} "
                             f"cannot continue: {exc}") from None

    def _check_restored_constraints(self, state):
        """A restored state of a constrained model lies on its constraints as the step
        check requires (cosim.constraint_guard bounds, with the state's parameters; the
        gross bound for a method that only bounds the drift), and so do the earlier
        accepted points a BDF history implies (measured ≤ 0.17 of the bounds: bdf, bdf-i2,
        bdf-i1 on six library models, rtol 1e-3 to 1e-9): else StateError naming the
        field, and set_state puts the previous state back."""
        model = self.model
        if self.constraint_check == "off" or model.kind != "multibody" or model.n_c == 0:
            return
        integ = self.integrator
        points = [(0, float(integ.t), integ.y, "integrator.y")]
        declared = getattr(integ, "state_declaration", None)
        if declared is not None and declared.last_step is None and declared.steps is not None:
            field = f"integrator.{declared.history_key()}"
            points += [(back, t, y, field) for back, t, y, _, _ in declared.solved_points(state["integrator"])[1:]]
        for back, t, y, field in points:
            q, v = model.split(y)
            with np.errstate(all="ignore"):
                pos, i, vel, j, _ = constraint_guard.residuals(model, t, q, v)
            if self._drift_only:   # (velocities too: a drift-only run keeps them ~1e-3 of it, measured)
                bp, bv = (constraint_guard.gross_bound(self.rtol, self.atol, q),
                          constraint_guard.gross_bound(self.rtol, self.atol, v))
            else:
                bp, bv = constraint_guard.restore_bounds(self.method, self.rtol, self.atol, q, v,
                                                         self._positions_only)
            at = f"t={t!r}" if back == 0 else f"the point {back} step{'s' * (back > 1)} back it implies, t={t!r}"
            if not pos <= bp:
                raise StateError(f"state field {field}: constraint {model.constraint_names[i]!r} "
                                 f"is violated at {at}: |C| = {pos:.3e} > {bp:.3e} (the bound of "
                                 f"a restored {self.method} state, derived from rtol={self.rtol!r} and atol={self.atol!r})")
            if not vel <= bv:
                raise StateError(f"state field {field}: the velocity constraint of "
                                 f"{model.constraint_names[j]!r} is violated at {at}: |C_q v + C_t| "
                                 f"= {vel:.3e} > {bv:.3e} (the bound of "
                                 f"{'a restored ' + self.method + ' state' if self._drift_only else 'the step check'}, "
                                 f"derived from rtol={self.rtol!r} and atol={self.atol!r})")

    def _check_state(self, s):
        # the full schema, checked before anything is applied (cosim.state_schema)
        check_simulation_state(self, s)

    def _apply_state(self, s):
        changed = False
        blocks = dict(self._initial_block_params)  # a state written before they were tunable
        for key, value in s["params"].items():
            if key in self._block_params and key not in self.model.params:
                blocks[key] = value
            elif not _same(self.model.params[key], value):
                self.model.set_parameter(key, value)
                changed = True
        self._restore_block_parameters(blocks)
        if changed:
            self._refresh_input_limits()
        rows = s.get("constraint_rows")
        if rows is not None and list(rows) != self._rows_state()["constraint_rows"]:
            self.integrator.model.select(rows)
        self._back_to(s["integrator"])   # (a state dictionary, or a _rollback_point's point)
        self._time = float(s["time"])
        self._u_ext = np.array(s["u_ext"], dtype=float)
        self._u = np.array(s["u"], dtype=float)
        for b, d in zip(self.blocks, s["blocks"]):
            b.restore(d)
        for c, k in zip(self._clocks, s["clocks"]):
            c.set_index(k)
        self._z = np.array(s["z"], dtype=float)
        self._event_log = list(s["event_log"])
        self._log_tuple = None
        self._n_comm = int(s["communication_steps"])
        self._n_events = int(s["events"])
        self._stopped = bool(s["stopped"])
        self._stop_time = None if s["stop_time"] is None else float(s["stop_time"])
        self._chatter.restore(s["chatter"])

    def serialize_state(self) -> bytes:
        """Bytes: versioned, self-describing (config in the header), checksummed, no pickle."""
        return self.serialize_snapshot(self.get_state())

    def serialize_snapshot(self, state) -> bytes:
        """:meth:`serialize_state` bytes of a snapshot taken earlier by :meth:`get_state`
        of this simulation; the simulation itself is neither read nor changed."""
        state = dict(state, event_log=[dict(e) for e in state["event_log"]])
        return serialization.dumps(state, meta={"kind": "cosim.Simulation", "config": self._config})

    def deserialize_state(self, blob):
        """Restore from :meth:`serialize_state` bytes of a simulation built with the same
        configuration.  Corrupt, truncated or foreign blobs raise StateError and change
        nothing."""
        meta, data = serialization.loads(blob)
        if not isinstance(meta, Mapping) or meta.get("kind") != "cosim.Simulation":
            raise StateError("state blob was not written by cosim.Simulation")
        config = meta.get("config")
        if not isinstance(config, Mapping):
            raise StateError("state blob has no configuration")
        for key, mine in self._config.items():
            if config.get(key) != mine:
                raise StateError(f"state blob is for a different simulation: {key} is "
                                 f"{config.get(key)!r:.200}, this simulation has {mine!r:.200}")
        try:
            self.set_state(data)
        except StateError:
            raise
        except CosimError as exc:  # e.g. a parameter value the model rejects
            raise StateError(f"state blob content is invalid: {exc}") from exc

    def reset(self):
        """Back to the initial state: t = start_time, default inputs, IC analysis re-run."""
        self._start(new_integrator=True)

    def __repr__(self):
        return (f"Simulation(model={self.model.name!r}, method={self.method!r}, t={self._time!r}, "
                f"blocks={[b.name for b in self.blocks]})")


__all__ = ["Simulation", "Block"]


_PACKAGE = __name__.rpartition(".")[0] + "."  # "cosim." (or the FMU bundle's private copy)


def is_user_model(model):
    """True unless ``model``'s class comes from this package (the library's models)."""
    return not type(model).__module__.startswith(_PACKAGE)


def _quick_check(model):
    """Simulation(check="quick"): the checker's comparisons at the initial state only
    (no random states, no trajectory); a failing term is a ModelDefinitionError."""
    from .ic import check_terms
    from .model_check import check_model
    # every term once with overflow raised first: a parameter that overflows a user model's
    # term is then one error naming the term, not a raw OverflowError from the checker
    probe_model(model, 0.0, model.initial_y(), model.default_inputs())
    if model.kind == "multibody":  # shapes first: its errors name the method and the time
        q, v = model.initial_state()
        check_terms(model, 0.0, np.asarray(q, dtype=float), np.asarray(v, dtype=float),
                    model.default_inputs())
    report = check_model(model, n_states=0, trajectory=False)
    if not report.ok:
        cls = type(model)
        bad = "; ".join(f"{r.term}: {r.note}" for r in report.failures())
        raise ModelDefinitionError(
            f"model {model.name!r} fails the set-up check at its initial state ({bad}); "
            f"`cosim check {cls.__module__}:{cls.__qualname__}` prints the table "
            f"(Simulation(check='off') skips this check)")
