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
    communication_step: 0.01        # the master step (also the recording step; default 0.01)
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

A scenario file is a :class:`cosim.spec.SimulationSpec` file (the same keys, checked
there once, plus ``record``/``metrics``/``backend``); :class:`Scenario` keeps the
older object API over it and runs it with :func:`cosim.run.execute`.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .errors import CosimError, InvalidInputError, ScenarioError, SpecError
from .multirate import exact_time
from .options import check_step_against_grid, check_tolerances, exact_grid
from .signals import SIGNAL_TYPES, InputSignal
from .validation import finite_float


class Scenario:
    """A parsed scenario; :meth:`build` makes the Simulation, :meth:`run` runs it."""

    def __init__(self, data, source="<scenario>"):
        from .spec import SimulationSpec, thaw
        self.source = source
        self.data = data
        self.spec = SimulationSpec.from_dict(data, source=source)
        sp = self.spec
        if sp.model_format == "urdf":  # {urdf: PATH} resolved: the text travels (an FMU of it)
            self.data = dict(data, model=sp.to_dict()["model"], params=thaw(sp.params))
        self.name = sp.name or Path(str(source)).stem
        self.description = sp.description
        self.model = sp.model
        self.params = thaw(sp.params)
        self.method = sp.method
        self.start_time = sp.start_time
        self.stop_time = sp.stop_time
        self.communication_step = None if sp.communication_step is None else \
            exact_time(sp.communication_step, "communication_step")
        self.blocks = thaw(sp.blocks)
        self.connections = thaw(sp.connections)
        self.signals = {n: InputSignal(n, s) for n, s in thaw(sp.inputs).items()}

    @classmethod
    def load(cls, path):
        from .spec import read_file
        data, path = read_file(path, "scenario")
        return cls(data, source=str(path))

    def build(self, backend="auto"):
        from .simulation import Simulation
        try:
            sim = Simulation.from_spec(self.spec.replace(backend=backend))
        except CosimError as exc:
            if isinstance(exc, ScenarioError) and str(exc).startswith(str(self.source)):
                raise
            raise ScenarioError(f"{self.source}: {exc}") from None
        self._check_options(sim)
        return sim

    def _check_options(self, sim):
        """Say where a value of the file is not used as written (cosim.options)."""
        d = self.data
        check_tolerances(self.method, [k for k in ("rtol", "atol") if d.get(k) is not None])
        if d.get("h") is not None and self.communication_step is not None:
            grid = exact_grid(self.communication_step, sim.base_step_exact)
            what = "the communication step" if grid == self.communication_step else \
                "the grid of the communication step and the blocks' sample times"
            check_step_against_grid(sim.h, grid, h_name=f"{Path(self.source).name}: h", grid_name=what,
                                    fix="make communication_step and the sample times multiples of h")

    def communication_points(self, stop_time=None):
        """Exact grid start + k·dt up to stop_time, plus the signals' breakpoints."""
        from .run import communication_points
        return communication_points(self.spec, self.stop_time if stop_time is None else stop_time,
                                    self.signals.values())

    def run(self, stop_time=None, sim=None, progress=None, backend="auto"):
        """Run to the stop time; returns a :class:`ScenarioResult`.  ``backend``
        (auto, numba, python) is passed to :class:`cosim.Simulation`."""
        from .run import execute
        spec = self.spec
        if stop_time is not None:
            stop_time = finite_float("--t-end", stop_time)
            if not stop_time > self.start_time:
                raise ScenarioError(f"stop time {stop_time!r} must be after start_time {self.start_time!r}")
            spec = spec.replace(stop_time=stop_time)
        sim = sim or self.build(backend=backend)
        sim, result = execute(spec, sim=sim, progress=progress)
        return ScenarioResult(self, sim, result)


class ScenarioResult:
    """A scenario run: the plain :class:`~cosim.run.RunResult` (``result``) plus the
    live simulation (``sim``) for callers that continue it."""

    def __init__(self, scenario, sim, result):
        self.scenario, self.sim, self.result = scenario, sim, result
        self.time, self.y, self.outputs, self.inputs = result.time, result.states, result.outputs, result.inputs
        self.wall_time = result.wall_time_s

    def summary(self):
        return scenario_summary(self.result, self.scenario.name)

    def write_csv(self, path):
        write_scenario_csv(path, self.result)

    def write_plot(self, path):
        write_scenario_plot(path, self.result, self.scenario.name)


def scenario_summary(r, name=None):
    """The ``cosim run --json`` object of a :class:`~cosim.run.RunResult`."""
    span = float(r.time[-1] - r.time[0])
    comm = r.spec.communication_step
    return {
        "scenario": name or r.spec.name,
        "model": r.model,
        "method": r.method,
        "t": float(r.time[-1]),
        "communication_step": None if comm is None else float(comm),
        "base_step": r.base_step,
        "base_step_exact": r.base_step_exact,
        "blocks": r.blocks,
        "stopped": r.stopped,
        "stop_time": r.stop_time,
        "state": dict(zip(r.state_names, (float(v) for v in r.states[-1]))),
        "outputs": dict(zip(r.output_names, r.outputs[-1].tolist())),
        "events": r.events,
        "stats": r.stats,
        "wall_time_s": r.wall_time_s,
        "real_time_factor": (span / r.wall_time_s) if r.wall_time_s > 0 else None,
    }


def write_scenario_csv(path, r):
    cols = ["time"] + list(r.state_names) + list(r.output_names) + [f"input:{n}" for n in r.input_names]
    table = np.hstack([r.time[:, None], r.states, r.outputs, r.inputs])
    np.savetxt(path, table, delimiter=",", header=",".join(cols), comments="", fmt="%.17g")


def write_scenario_plot(path, r, name=None):
    """The figure of a scenario run (:func:`cosim.plotting.write_run_plot`: one panel per
    unit, references with what they command, constant signals listed, not drawn)."""
    from .plotting import write_run_plot
    return write_run_plot(path, r, title=f"{name or r.spec.name}: {r.model}, {r.method} "
                                         f"({r.backend} backend)")


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
            raise SpecError(f"{source}: model urdf {path!r} must name a URDF file in the "
                                f"scenario's folder {str(folder)!r}")
        try:
            spec["urdf_text"] = read_file(full)
        except InvalidInputError as exc:
            raise SpecError(f"{source}: {exc}") from None
    return spec


def default_method(model, source="<scenario>", *, fixed_step=False, driven=False, params=None,
                   backend="auto"):
    """The default method for ``model`` (cosim.method_choice: one rule everywhere)."""
    from .method_choice import default_method as rule
    try:
        return rule(model, fixed_step=fixed_step, driven=driven, params=params, backend=backend)
    except CosimError as exc:
        raise ScenarioError(f"{source}: {exc}") from None


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


__all__ = ["InputSignal", "Scenario", "ScenarioResult", "load_scenario", "run_scenario", "SIGNAL_TYPES",
           "scenario_summary", "write_scenario_csv", "write_scenario_plot"]
