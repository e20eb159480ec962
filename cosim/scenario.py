"""YAML scenarios: a plant, a method, discrete blocks, connections, input signals.

A scenario file (see ``scenarios/*.yaml``)::

    name: lti_state_feedback
    description: ...
    model: lti                      # library name or package.module:Class
    params: {A: [[0, 1], [-4, -0.4]], ...}
    method: state-transition        # default: generalized-alpha (multibody),
                                    # state-transition (LTI), dopri5 (other ODEs)
    rtol: 1.0e-6                    # optional: atol, h, method_options, event_tolerance,
                                    #           on_chattering
    start_time: 0.0
    stop_time: 5.0
    communication_step: 0.01        # the master step (also the recording step)
    blocks:                         # cosim.blocks types: pid, discrete_state_space,
      - {type: state_feedback, name: k, sample_time: 0.01, K: [[16, 5.6]], reference_gain: [[20]]}
    connections: ["position -> k.x0", "velocity -> k.x1", "k.y -> force"]
    inputs:                         # external inputs (sim.input_names) -> signal
      k.reference: {type: step, time: 1.0, after: 0.5}

Input signals are held over each communication step (zero-order hold, the
value at the step's start): ``constant`` (value), ``step`` (time, before,
after), ``ramp`` (start_time, slope, initial), ``sine`` (amplitude, frequency
[Hz] or omega [rad/s], phase, offset; ``exact: true`` on an LTI plant input
appends the sine as an LTI signal generator to the plant, seed 001 example 3.4,
so it is reproduced exactly instead of held), ``table`` (times, values; ZOH).  The
instants where a step or table changes are added to the communication grid,
so these scheduled input changes are hit exactly (time events).  Sample times
and the communication step are read as exact decimals (``cosim.multirate``).
"""
from __future__ import annotations

import math
import time as _time
from bisect import bisect_right
from pathlib import Path

import numpy as np

from .errors import CosimError, InvalidInputError, ScenarioError
from .multirate import exact_time
from .options import check_step_against_grid, check_tolerances, exact_grid
from .validation import communication_step_count, finite_float

SIGNAL_TYPES = ("constant", "step", "ramp", "sine", "table")
_TOP_KEYS = {"name", "description", "model", "params", "method", "rtol", "atol", "h", "method_options",
             "start_time", "stop_time", "communication_step", "blocks", "connections", "inputs",
             "event_tolerance", "on_chattering", "max_chattering_events"}


class InputSignal:
    """A scalar input signal u(t) with its breakpoints (instants where it jumps)."""

    def __init__(self, name, spec):
        self.name = name
        if not isinstance(spec, dict):
            spec = {"type": "constant", "value": spec}
        spec = dict(spec)
        self.kind = spec.pop("type", "constant")
        if self.kind not in SIGNAL_TYPES:
            raise ScenarioError(f"input {name!r}: unknown signal type {self.kind!r} "
                                f"(types: {', '.join(SIGNAL_TYPES)})")

        def num(key, default=None, **kw):
            if key not in spec:
                if default is None:
                    raise ScenarioError(f"input {name!r} ({self.kind}) needs {key!r}")
                return default
            try:
                return finite_float(f"input {name!r} {key}", spec.pop(key), **kw)
            except InvalidInputError as exc:
                raise ScenarioError(str(exc)) from None

        self.breakpoints = []
        if self.kind == "constant":
            self.value = num("value", 0.0)
        elif self.kind == "step":
            self.time = num("time")
            self.before = num("before", 0.0)
            self.after = num("after") if "after" in spec else num("value")
            self.breakpoints = [self.time]
        elif self.kind == "ramp":
            self.start = num("start_time", 0.0)
            self.slope = num("slope")
            self.initial = num("initial", 0.0)
            self.breakpoints = [self.start]
        elif self.kind == "sine":
            self.exact = spec.pop("exact", False)
            if not isinstance(self.exact, bool):
                raise ScenarioError(f"input {name!r}: 'exact' must be true or false, got {self.exact!r}")
            self.amplitude = num("amplitude", 1.0)
            if "omega" in spec and "frequency" in spec:
                raise ScenarioError(f"input {name!r}: give frequency [Hz] or omega [rad/s], not both")
            self.omega = num("omega") if "omega" in spec else 2.0 * math.pi * num("frequency")
            self.phase = num("phase", 0.0)
            self.offset = num("offset", 0.0)
        elif self.kind == "table":
            times, values = spec.pop("times", None), spec.pop("values", None)
            if not isinstance(times, list) or not isinstance(values, list) or len(times) != len(values) \
                    or not times:
                raise ScenarioError(f"input {name!r}: a table needs equally long non-empty lists "
                                    f"'times' and 'values'")
            try:
                self.times = [finite_float(f"input {name!r} times[{i}]", t) for i, t in enumerate(times)]
                self.values = [finite_float(f"input {name!r} values[{i}]", v) for i, v in enumerate(values)]
            except InvalidInputError as exc:
                raise ScenarioError(str(exc)) from None
            if any(b <= a for a, b in zip(self.times, self.times[1:])):
                raise ScenarioError(f"input {name!r}: table times must increase, got {self.times}")
            self.breakpoints = list(self.times)
        if spec:
            raise ScenarioError(f"input {name!r} ({self.kind}): unknown keys {sorted(spec)}")

    def generator(self, t0):
        """(F, G, v0) of this sine as an LTI signal generator started at t0."""
        from .integrators.state_transition import sine_generator
        return sine_generator(self.amplitude, self.omega, self.omega * t0 + self.phase, self.offset)

    def value_at(self, t):
        k = self.kind
        if k == "constant":
            return self.value
        if k == "step":
            return self.after if t >= self.time else self.before
        if k == "ramp":
            return self.initial + self.slope * max(0.0, t - self.start)
        if k == "sine":
            return self.offset + self.amplitude * math.sin(self.omega * t + self.phase)
        i = bisect_right(self.times, t) - 1  # table, zero-order hold
        return self.values[max(i, 0)]


class Scenario:
    """A parsed scenario; :meth:`build` makes the Simulation, :meth:`run` runs it."""

    def __init__(self, data, source="<scenario>"):
        if not isinstance(data, dict):
            raise ScenarioError(f"{source}: a scenario must be a mapping, got {type(data).__name__}")
        unknown = sorted(set(data) - _TOP_KEYS)
        if unknown:
            raise ScenarioError(f"{source}: unknown keys {unknown} (allowed: {', '.join(sorted(_TOP_KEYS))})")
        self.source = source
        self.data = data
        self.name = str(data.get("name", Path(str(source)).stem))
        self.description = str(data.get("description", ""))
        model = data.get("model")
        if model is None:
            raise ScenarioError(f"{source}: 'model' is required")
        self.params = dict(data.get("params") or {})
        if isinstance(model, dict):
            self.params.update(model.get("params") or {})
            if "urdf" in model or "urdf_text" in model:  # a robot: {urdf: PATH} (issue 18)
                model = urdf_plant(model, source)
                self.data = data = dict(data, model=dict(model, params=self.params))
            else:
                model = model.get("name")
        self.model = model
        # default method: generalized-alpha for multibody plants, the exact
        # state-transition method for LTI plants, dopri5 for other ODEs
        self.method = default_method(model, source) if data.get("method") is None else str(data["method"])
        try:
            self.start_time = finite_float("start_time", data.get("start_time", 0.0))
            self.stop_time = finite_float("stop_time", data.get("stop_time", 1.0))
            self.communication_step = exact_time(data.get("communication_step", 0.01), "communication_step")
        except InvalidInputError as exc:
            raise ScenarioError(f"{source}: {exc}") from None
        if not self.stop_time > self.start_time:
            raise ScenarioError(f"{source}: stop_time {self.stop_time!r} must be after start_time "
                                f"{self.start_time!r}")
        self.blocks = data.get("blocks") or []
        self.connections = data.get("connections") or []
        if not isinstance(self.blocks, list) or not isinstance(self.connections, list):
            raise ScenarioError(f"{source}: 'blocks' and 'connections' must be lists")
        inputs = data.get("inputs") or {}
        if not isinstance(inputs, dict):
            raise ScenarioError(f"{source}: 'inputs' must map input names to signals")
        self.signals = {str(k): InputSignal(str(k), v) for k, v in inputs.items()}

    @classmethod
    def load(cls, path):
        import yaml
        path = resolve(path)
        try:
            with open(path, encoding="utf-8") as fh:
                data = yaml.safe_load(fh)
        except OSError as exc:
            from .shipped import scenario_names
            raise ScenarioError(f"cannot read scenario {str(path)!r}: {exc.strerror} (shipped scenarios, "
                                f"usable by name: {', '.join(scenario_names())})") from None
        except yaml.YAMLError as exc:
            raise ScenarioError(f"scenario {str(path)!r} is not valid YAML: {exc}") from None
        return cls(data, source=str(path))

    def build(self, backend="auto"):
        from .simulation import Simulation
        d = self.data
        kwargs = {"backend": backend}
        for key in ("rtol", "atol", "h", "event_tolerance", "on_chattering", "max_chattering_events"):
            if d.get(key) is not None:
                kwargs[key] = d[key]
        model, params = self.model, self.params
        exact = {n: sig for n, sig in self.signals.items() if getattr(sig, "exact", False)}
        if exact:
            model, params = self._augmented_plant(exact), {}
        try:
            sim = Simulation(model=model, method=self.method, params=params,
                             method_options=d.get("method_options") or {}, blocks=self.blocks,
                             connections=self.connections, start_time=self.start_time, **kwargs)
        except CosimError as exc:
            if isinstance(exc, ScenarioError):
                raise
            raise ScenarioError(f"{self.source}: {exc}") from None
        unknown = sorted(set(self.signals) - set(exact) - set(sim.input_names))
        if unknown:
            raise ScenarioError(f"{self.source}: inputs {unknown} are not external inputs of the "
                                f"simulation (external inputs: {', '.join(sim.input_names) or 'none'})")
        self._check_options(sim)
        return sim

    def _check_options(self, sim):
        """Say where a value of the file is not used as written (cosim.options)."""
        d = self.data
        check_tolerances(self.method, [k for k in ("rtol", "atol") if d.get(k) is not None])
        if d.get("h") is not None:
            grid = exact_grid(self.communication_step, sim.base_step_exact)
            what = "the communication step" if grid == self.communication_step else \
                "the grid of the communication step and the blocks' sample times"
            check_step_against_grid(sim.h, grid, h_name=f"{Path(self.source).name}: h", grid_name=what,
                                    fix="make communication_step and the sample times multiples of h")

    def _augmented_plant(self, exact):
        """LTI plant with the exact sine inputs appended as signal generators
        (seed 001 §3.5, example 3.4): these inputs are then reproduced exactly, not
        held over communication steps."""
        from .integrators.state_transition import augment_model
        from .models import load_model
        from .models.lti import LTIModel
        try:
            plant = load_model(self.model, **self.params)
        except CosimError as exc:
            raise ScenarioError(f"{self.source}: {exc}") from None
        if not isinstance(plant, LTIModel):
            raise ScenarioError(f"{self.source}: 'exact' sine inputs {sorted(exact)} need an LTI plant, "
                                f"model {plant.name!r} is not one")
        driven = {str(c).partition("->")[2].strip() if isinstance(c, str) else None for c in self.connections}
        for name in exact:
            if name not in plant.input_names or name in driven:
                raise ScenarioError(f"{self.source}: exact sine input {name!r} must be an undriven plant "
                                    f"input (plant inputs: {', '.join(plant.input_names)})")
        try:
            return augment_model(plant, {n: sig.generator(self.start_time) for n, sig in exact.items()})
        except CosimError as exc:
            raise ScenarioError(f"{self.source}: {exc}") from None

    def communication_points(self, stop_time=None):
        """Exact grid start + k·dt up to stop_time, plus the signals' breakpoints."""
        stop = self.stop_time if stop_time is None else stop_time
        start = exact_time(self.start_time, "start_time", positive=False)
        stop_f = exact_time(stop, "stop_time", positive=False)
        n = math.ceil((stop_f - start) / self.communication_step)
        communication_step_count(float(stop_f - start), float(self.communication_step))
        points = {float(start + k * self.communication_step) for k in range(1, n)}
        points.add(float(stop_f))
        for sig in self.signals.values():
            points.update(t for t in sig.breakpoints if self.start_time < t < stop)
        grid = sorted(points)
        out = []
        for t in grid:  # drop slivers from coinciding breakpoints
            if not out or t - out[-1] > 1e-12 * max(1.0, abs(t)):
                out.append(t)
        return out

    def run(self, stop_time=None, sim=None, progress=None, backend="auto"):
        """Run to the stop time; returns a :class:`ScenarioResult`.  ``backend``
        (auto, numba, python) is passed to :class:`cosim.Simulation`."""
        if stop_time is not None:
            stop_time = finite_float("--t-end", stop_time)
            if not stop_time > self.start_time:
                raise ScenarioError(f"stop time {stop_time!r} must be after start_time {self.start_time!r}")
        sim = sim or self.build(backend=backend)
        signals = [(sim.input_names.index(n), s) for n, s in self.signals.items()
                   if not getattr(s, "exact", False)]
        u = sim.get_inputs()

        def apply_inputs(t):
            if signals:
                for i, sig in signals:
                    u[i] = sig.value_at(t)
                sim.set_inputs(u)

        apply_inputs(sim.time)
        times, ys, outs, ins = [sim.time], [sim.y], [sim.get_outputs()], [sim.get_inputs()]
        points = self.communication_points(stop_time)
        wall0 = _time.perf_counter()
        for t_next in points:
            sim.do_step(sim.time, t_next - sim.time)
            apply_inputs(t_next)  # ZOH: the value at the start of the next step (grid time)
            times.append(sim.time)
            ys.append(sim.y)
            outs.append(sim.get_outputs())
            ins.append(sim.get_inputs())
            if progress:
                progress(sim.time)
        wall = _time.perf_counter() - wall0
        return ScenarioResult(self, sim, np.array(times), np.array(ys), np.array(outs).reshape(len(times), -1),
                              np.array(ins).reshape(len(times), -1), wall)


class ScenarioResult:
    def __init__(self, scenario, sim, time, y, outputs, inputs, wall_time):
        self.scenario, self.sim = scenario, sim
        self.time, self.y, self.outputs, self.inputs = time, y, outputs, inputs
        self.wall_time = wall_time

    def summary(self):
        sim = self.sim
        span = float(self.time[-1] - self.time[0])
        base = sim.base_step_exact
        return {
            "scenario": self.scenario.name,
            "model": sim.model.name,
            "method": sim.method,
            "t": float(sim.time),
            "communication_step": float(self.scenario.communication_step),
            "base_step": sim.base_step,
            "base_step_exact": None if base is None else f"{base.numerator}/{base.denominator}",
            "blocks": [{"name": b.name, "type": b.type_name, "sample_time": float(b.sample_time),
                        "offset": float(b.offset)} for b in sim.blocks],
            "stopped": sim.stopped,
            "stop_time": sim.stop_time,
            "state": dict(zip(sim.state_names, (float(v) for v in sim.y))),
            "outputs": sim.get_output_dict(),
            "events": sim.event_log,
            "stats": sim.stats,
            "wall_time_s": self.wall_time,
            "real_time_factor": (span / self.wall_time) if self.wall_time > 0 else None,
        }

    def write_csv(self, path):
        sim = self.sim
        cols = ["time"] + list(sim.state_names) + list(sim.output_names) + \
            [f"input:{n}" for n in sim.input_names]
        table = np.hstack([self.time[:, None], self.y, self.outputs, self.inputs])
        np.savetxt(path, table, delimiter=",", header=",".join(cols), comments="", fmt="%.17g")

    def write_plot(self, path):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        sim = self.sim
        n_plant = len(sim.model.output_names)
        panels = [("plant outputs", list(range(n_plant)), self.outputs)]
        if sim.blocks:
            panels.append(("block outputs", list(range(n_plant, len(sim.output_names))), self.outputs))
        if sim.input_names:
            panels.append(("external inputs", list(range(len(sim.input_names))), self.inputs))
        fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.8 * len(panels)), sharex=True, squeeze=False)
        # legend labels with the model's units (SI; "1" = dimensionless or unknown)
        units = {s.name: s.unit for s in (*sim.model.outputs, *sim.model.inputs)}

        def label(name):
            unit = units.get(name[6:] if name.startswith("plant.") else name, "1")
            return f"{name} [{unit}]" if unit != "1" else name

        names = {"external inputs": [label(n) for n in sim.input_names]}
        for ax, (title, cols, data) in zip(axes[:, 0], panels):
            labels = names.get(title, [label(n) for n in sim.output_names])
            for c in cols:
                # inputs recorded at t_k hold from t_k on (steps-post); a block output
                # recorded at t_k was computed at its last sample before t_k (steps-pre)
                style = {"plant outputs": "default", "block outputs": "steps-pre"}.get(title, "steps-post")
                ax.plot(self.time, data[:, c], label=labels[c], drawstyle=style)
            for ev in sim.event_log:
                if ev["kind"] in ("state", "stop"):
                    ax.axvline(ev["time"], color="0.7", lw=0.6, ls=":")
            ax.set_ylabel(title)
            ax.legend(fontsize=7, ncol=3)
        axes[0, 0].set_title(f"{self.scenario.name}: {sim.model.name} — {sim.method}")
        axes[-1, 0].set_xlabel("time [s]")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)


def urdf_plant(spec, source):
    """``model: {urdf: PATH, frames: [...], position_limits: bool}`` as a URDF model spec
    with the text (:mod:`cosim.models.urdf`).  PATH is relative to the scenario file and
    must stay in its folder (a scenario names no file elsewhere)."""
    from .models.urdf_parse import read_file

    spec = {k: v for k, v in spec.items() if k != "params"}
    if "urdf" in spec:
        path = spec.pop("urdf")
        folder = Path(str(source)).resolve().parent
        full = (folder / str(path)).resolve()
        if not isinstance(path, str) or not full.is_relative_to(folder) or not full.is_file():
            raise ScenarioError(f"{source}: model urdf {path!r} must name a URDF file in the "
                                f"scenario's folder {str(folder)!r}")
        try:
            spec["urdf_text"] = read_file(full)
        except InvalidInputError as exc:
            raise ScenarioError(f"{source}: {exc}") from None
    return spec


def default_method(model, source="<scenario>"):
    """generalized-alpha (multibody), state-transition (LTI), dopri5 (other ODEs)."""
    from .models import Model, model_class
    from .models.lti import LTIModel
    try:
        cls = type(model) if isinstance(model, Model) else model_class(model)
    except CosimError as exc:
        raise ScenarioError(f"{source}: {exc}") from None
    if cls.kind == "multibody":
        return "generalized-alpha"
    return "state-transition" if issubclass(cls, LTIModel) else "dopri5"


def resolve(path):
    """A scenario path: an existing file, else a shipped scenario named bare
    (``pendulum_pd`` or ``pendulum_pd.yaml``, see ``cosim scenarios``)."""
    from .shipped import shipped_scenario
    p = Path(path)
    if p.exists():
        return p
    return shipped_scenario(path) or p


def load_scenario(path):
    return Scenario.load(path)


def run_scenario(path, stop_time=None):
    return Scenario.load(path).run(stop_time=stop_time)


__all__ = ["InputSignal", "Scenario", "ScenarioResult", "load_scenario", "run_scenario", "SIGNAL_TYPES"]
