"""The FMI 2.0 co-simulation slave: a thin pythonfmu adapter over :class:`cosim.Simulation`.

Every FMU built by ``cosim fmu build`` ships this package (``resources/fmu/``),
the ``cosim`` core and a JSON configuration (``resources/cosim_fmu.json``)
describing the simulation and the FMI variables.  The generated slave module
subclasses :class:`CosimSlave`; all numerics stay in ``cosim``.

FMI behaviour (FMI 2.0 standard, §2.1.3 status codes, §4.2.2 fmi2DoStep):

* An ``fmi2DoStep`` that cannot be performed — NaN/inf input, step size not
  > 0 or not finite, a ``currentCommunicationPoint`` other than the FMU time,
  a rejected tunable parameter, a failing/non-converging integration —
  returns **fmi2Discard** with a message through the logger callback
  (category ``logStatusDiscard``), and the instance stays exactly as before
  the call: ``fmi2GetRealStatus(fmi2LastSuccessfulTime)`` reports the
  ``currentCommunicationPoint`` (the slave completed an empty sub-interval,
  which is what fmi2Discard means in co-simulation), and the master may fix
  the inputs, retry with a smaller step or restore a saved FMU state.
  fmi2Error is not used for these: per §2.1.3 it declares the instance
  unusable (short of fmi2SetFMUstate/fmi2Reset), which is never the case.
* pythonfmu 0.7 turns a Python exception in any callback into fmi2Fatal
  *and releases the slave object* (``handle_py_exception`` → ``cleanPyObject``,
  a use-after-free later), so no entry point here lets an exception escape.
  Failures outside fmi2DoStep that FMI would report as fmi2Error — a bad
  fixed parameter found at initialization, a corrupt or foreign serialized
  FMU state, a wrong value reference — are logged with status fmi2Error and
  put the instance in a *failed* state in which every fmi2DoStep returns
  fmi2Discard with that message, until fmi2Reset or an fmi2SetFMUstate with a
  valid state (the recovery FMI prescribes after fmi2Error).
* Messages reach the logger only with debug logging on (``loggingOn`` at
  instantiation or ``fmi2SetDebugLogging``), a pythonfmu 0.7 behaviour.
* Inputs are held (zero-order hold) over a communication step;
  ``canInterpolateInputs="false"``.  Events inside a step are located and
  applied inside the step; the Integer output ``event_count`` counts them.
* FMU state get/set/free and (de)serialization go through
  ``Simulation.get_state``/``set_state``/``serialize_state``/
  ``deserialize_state`` (bit-identical continuation); a serialized FMU state
  is a :mod:`cosim.serialization` blob (versioned, checksummed, no pickle).
* No module-level simulation state: every instance owns its configuration,
  its :class:`~cosim.Simulation`, its inputs and outputs.
"""
from __future__ import annotations

import json
import math
import os
import sys
from xml.etree.ElementTree import Element, SubElement

import numpy as np
from cosim import serialization
from cosim.errors import CosimError, InvalidInputError, StateError
from cosim.validation import finite_float
from pythonfmu import Fmi2Slave, Integer, Real, String
from pythonfmu.default_experiment import DefaultExperiment
from pythonfmu.enums import Fmi2Causality, Fmi2Initial, Fmi2Status, Fmi2Variability

CONFIG_FILE = "cosim_fmu.json"
CONFIG_FORMAT = "cosim-fmu-config"
STATE_KIND = "cosim.fmu"
_TIME_MATCH = 1e-12  # relative match of fmi2DoStep's t with the FMU time, as Simulation.do_step
_INF = math.inf

# pythonfmu 0.7.0's native loader (findClass in PySlaveInstance.cpp) calls
# Py_DECREF on the *borrowed* dict of the slave module once per fmi2Instantiate,
# after re-executing the module source with that dict as globals.  The
# generated slave module therefore calls pin_module_dict(globals()) at top
# level: the re-execution adds one reference right before the loader drops
# one.  Without it the module dict is freed after a few instantiations in one
# process (crash).  This list holds only those references, no simulation state.
_PINNED_MODULE_DICTS = []


def pin_module_dict(namespace):
    """Keep one extra reference to a slave module's globals (see above)."""
    _PINNED_MODULE_DICTS.append(namespace)


class _UnitReal(Real):
    """pythonfmu Real with a ``unit`` attribute (declared in UnitDefinitions)."""

    def __init__(self, name, unit=None, **kwargs):
        super().__init__(name, **kwargs)
        self.unit = unit

    def to_xml(self):
        node = super().to_xml()
        if self.unit:
            node.find("Real").set("unit", self.unit)
        return node


class _FmuState:
    """An fmi2FMUstate: a Simulation snapshot plus the FMU's input buffer and
    settings.  Immutable once taken; serialized lazily (and cached)."""

    __slots__ = ("identifier", "sim", "sim_state", "sim_blob", "inputs", "params", "solver",
                 "initialized", "start_time", "blob", "error")

    def to_bytes(self):
        if self.blob is None:
            sim_blob = self.sim_blob
            if sim_blob is None and self.sim_state is not None:
                sim_blob = _serialize_snapshot(self.sim, self.sim_state)
            data = {
                "sim": None if sim_blob is None else np.frombuffer(sim_blob, dtype=np.uint8),
                "inputs": np.array(self.inputs, dtype=float),
                "params": dict(self.params),
                "solver": dict(self.solver),
                "initialized": bool(self.initialized),
                "start_time": float(self.start_time),
            }
            self.blob = serialization.dumps(data, meta={"kind": STATE_KIND,
                                                        "identifier": self.identifier})
        return self.blob

    @classmethod
    def from_bytes(cls, blob):
        """Parse a serialized FMU state; a bad blob gives a state carrying ``error``."""
        self = cls()
        self.sim = self.sim_state = self.sim_blob = self.error = None
        self.blob = bytes(blob)
        try:
            meta, data = serialization.loads(self.blob)
            if not isinstance(meta, dict) or meta.get("kind") != STATE_KIND:
                raise StateError("serialized FMU state was not written by a cosim FMU")
            self.identifier = str(meta["identifier"])
            sim = data["sim"]
            self.sim_blob = None if sim is None else bytes(np.asarray(sim, dtype=np.uint8))
            self.inputs = [float(x) for x in data["inputs"]]
            self.params = dict(data["params"])
            self.solver = dict(data["solver"])
            self.initialized = bool(data["initialized"])
            self.start_time = float(data["start_time"])
        except StateError as exc:
            self.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - malformed content of an intact blob
            self.error = f"serialized FMU state is malformed: {exc!r}"
        return self


def _serialize_snapshot(sim, sim_state):
    """Bytes of a Simulation snapshot (the simulation's current state is kept)."""
    current = sim.get_state()
    try:
        sim.set_state(sim_state)
        return sim.serialize_state()
    finally:
        sim.set_state(current)


class CosimSlave(Fmi2Slave):
    """FMI 2.0 CS slave running one :class:`cosim.Simulation` (see module docstring).

    The generated module defines ``class <Identifier>(CosimSlave)``; all
    behaviour comes from the JSON configuration in the resources folder.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        resources = self.resources or os.path.dirname(os.path.abspath(__file__))
        if resources not in sys.path:  # bundled cosim (the native loader also does this)
            sys.path.insert(0, resources)
        with open(os.path.join(resources, CONFIG_FILE), encoding="utf-8") as fh:
            cfg = json.load(fh)
        if cfg.get("format") != CONFIG_FORMAT:
            raise ValueError(f"{CONFIG_FILE} in {resources!r} is not a cosim FMU configuration")
        self._cfg = cfg
        self.modelName = cfg["identifier"]
        self.description = cfg.get("description") or None
        self.version = cfg.get("cosim_version")
        de = cfg.get("default_experiment") or {}
        self.default_experiment = DefaultExperiment(
            start_time=de.get("start_time"), stop_time=de.get("stop_time"),
            step_size=de.get("step_size"), tolerance=de.get("tolerance"))

        variables = cfg["variables"]
        self._input_vars = variables["inputs"]
        self._output_vars = variables["outputs"]
        self._param_vars = variables["parameters"]
        self._solver_vars = variables["solver"]
        self._inputs = np.array([float(v["start"]) for v in self._input_vars], dtype=float)
        self._inputs_pending = True  # inputs not yet handed to the simulation
        self._outputs = None  # cached output values at the current time
        self._params = {v["key"]: float(v["start"]) for v in self._param_vars}
        self._tunable = {v["key"] for v in self._param_vars if v.get("tunable")}
        self._pending_params = {}
        self._solver = {v["key"]: v["start"] for v in self._solver_vars}
        self._start_time = float(de.get("start_time") or 0.0)
        self._sim = None
        self._initialized = False
        self._failure = None  # message of a failure that blocks fmi2DoStep (module docstring)
        self._real_get = {}
        self._real_set = {}
        self._register_all()

    # -- variables -----------------------------------------------------------------------
    def _register_all(self):
        C, V = Fmi2Causality, Fmi2Variability
        for i, v in enumerate(self._input_vars):
            self._add_real(v, C.input, V.continuous, getter=lambda i=i: float(self._inputs[i]),
                           setter=lambda x, i=i: self._set_input(i, x))
        for i, v in enumerate(self._output_vars):
            variability = V.discrete if v.get("discrete") else V.continuous
            self._add_real(v, C.output, variability, initial=Fmi2Initial.calculated,
                           getter=lambda i=i: self._output(i))
        for v in self._param_vars:
            key = v["key"]
            self._add_real(v, C.parameter, V.tunable if v.get("tunable") else V.fixed,
                           initial=Fmi2Initial.exact,
                           getter=lambda k=key: self._pending_params.get(k, self._params[k]),
                           setter=lambda x, k=key: self._set_param(k, x))
        for v in self._solver_vars:
            key = v["key"]
            if v.get("type") == "String":
                var = String(v["name"], causality=C.parameter, variability=V.fixed,
                             initial=Fmi2Initial.exact, description=v.get("description"),
                             getter=lambda k=key: self._solver[k],
                             setter=lambda x, k=key: self._set_solver(k, x))
                self.register_variable(var, nested=False)
            else:
                self._add_real(v, C.parameter, V.fixed, initial=Fmi2Initial.exact,
                               getter=lambda k=key: self._solver[k],
                               setter=lambda x, k=key: self._set_solver(k, x))
        counter = self._cfg["variables"]["event_counter"]
        self.register_variable(Integer(counter, causality=C.output, variability=V.discrete,
                                       initial=Fmi2Initial.calculated,
                                       description="number of events handled so far",
                                       getter=self._events), nested=False)

    def _add_real(self, v, causality, variability, initial=None, getter=None, setter=None):
        var = _UnitReal(v["name"], unit=v.get("unit"), causality=causality,
                        variability=variability, initial=initial,
                        description=v.get("description") or None, getter=getter, setter=setter)
        self.register_variable(var, nested=False)
        self._real_get[var.value_reference] = getter
        if setter is not None:
            self._real_set[var.value_reference] = setter

    # -- error handling (no exception may reach pythonfmu, see module docstring) -------------
    def _fail(self, what, exc):
        self._failure = f"{what} failed: {type(exc).__name__}: {exc}"
        self.log(f"{self._failure}; fmi2DoStep is refused (fmi2Discard) until fmi2Reset or "
                 f"fmi2SetFMUstate with a valid state", Fmi2Status.error)

    def _guarded(self, what, call, *args, default=None):
        try:
            return call(*args)
        except Exception as exc:  # noqa: BLE001 - see module docstring
            self._fail(what, exc)
            return default

    # fast paths for the hot loop (the base class type-checks each variable)
    def get_real(self, vrs):
        get = self._real_get
        try:
            return [get[vr]() for vr in vrs]
        except Exception:  # noqa: BLE001 - unknown reference or a failing output evaluation
            return [self._get_one(vr) for vr in vrs]

    def _get_one(self, vr):
        getter = self._real_get.get(vr)
        if getter is None:
            self._fail("fmi2GetReal", InvalidInputError(f"valueReference {vr} is not a Real variable"))
            return math.nan
        return self._guarded(f"fmi2GetReal(valueReference {vr})", getter, default=math.nan)

    def set_real(self, vrs, values):
        put = self._real_set
        for vr, value in zip(vrs, values):
            setter = put.get(vr)
            if setter is None:
                self._fail("fmi2SetReal", InvalidInputError(
                    f"valueReference {vr} is not a settable Real variable"))
                continue
            self._guarded(f"fmi2SetReal(valueReference {vr})", setter, value)

    def get_integer(self, vrs):
        return self._guarded("fmi2GetInteger", super().get_integer, vrs, default=[0] * len(vrs))

    def set_integer(self, vrs, values):
        self._guarded("fmi2SetInteger", super().set_integer, vrs, values)

    def get_boolean(self, vrs):
        return self._guarded("fmi2GetBoolean", super().get_boolean, vrs, default=[False] * len(vrs))

    def set_boolean(self, vrs, values):
        self._guarded("fmi2SetBoolean", super().set_boolean, vrs, values)

    def get_string(self, vrs):
        return self._guarded("fmi2GetString", super().get_string, vrs, default=[""] * len(vrs))

    def set_string(self, vrs, values):
        self._guarded("fmi2SetString", super().set_string, vrs, values)

    def _set_input(self, i, value):
        # validated when handed to the simulation (fmi2DoStep); NaN -> fmi2Discard there
        self._inputs[i] = value
        self._inputs_pending = True

    def _set_param(self, key, value):
        if not self._initialized:
            self._params[key] = value
            self._sim = self._outputs = None  # (re)built with the new value at initialization
        elif key in self._tunable:
            self._pending_params[key] = value  # applied (validated) at the next fmi2DoStep
        else:
            self.log(f"parameter {key!r} is fixed; setting it after initialization is ignored",
                     Fmi2Status.warning)

    def _set_solver(self, key, value):
        if self._initialized:
            self.log(f"solver setting {key!r} is fixed; setting it after initialization is ignored",
                     Fmi2Status.warning)
            return
        self._solver[key] = value
        self._sim = self._outputs = None

    # -- simulation ----------------------------------------------------------------------
    def _build_simulation(self):
        spec = dict(self._cfg["simulation"])
        solver = self._solver
        options = {v["key"]: solver[v["key"]] for v in self._solver_vars if v.get("option")}
        step = float(solver["step"])
        h = step if step > 0.0 else None
        if "scenario" in spec:  # plant + blocks built by cosim.scenario (as `cosim run` does)
            from cosim.scenario import Scenario

            data = dict(spec["scenario"])
            data["params"] = dict(data.get("params") or {}, **self._params)
            data["method_options"] = dict(data.get("method_options") or {}, **options)
            data.update(method=str(solver["method"]), rtol=float(solver["rtol"]),
                        atol=float(solver["atol"]), h=h, start_time=self._start_time)
            if not float(data.get("stop_time", 0.0)) > self._start_time:
                data["stop_time"] = self._start_time + 1.0  # the master decides when to stop
            return Scenario(data, source=f"FMU {self.modelName}").build()
        from cosim.simulation import Simulation

        params = dict(spec.pop("params", None) or {})
        params.update(self._params)
        options = dict(spec.pop("method_options", None) or {}, **options)
        return Simulation(params=params, method=str(solver["method"]), rtol=float(solver["rtol"]),
                          atol=float(solver["atol"]), h=h, method_options=options,
                          start_time=self._start_time, **spec)

    def _ensure_simulation(self):
        if self._sim is None:
            self._sim = self._build_simulation()
            self._inputs_pending = True
            self._outputs = None
        return self._sim

    def _output(self, i):
        out = self._outputs
        if out is None:
            out = self._outputs = self._ensure_simulation().get_outputs().tolist()
        return out[i]

    def _events(self):
        return 0 if self._sim is None else self._sim.stats["events"]

    def setup_experiment(self, start_time, stop_time=None, tolerance=None):
        if start_time != self._start_time:
            self._start_time = float(start_time)
            self._sim = self._outputs = None

    def exit_initialization_mode(self):
        self._initialized = True
        try:
            sim = self._ensure_simulation()  # a bad fixed parameter fails here
        except Exception as exc:  # noqa: BLE001 - see module docstring
            self._fail("fmi2ExitInitializationMode", exc)
            return
        if self._inputs_pending:
            try:
                sim.set_inputs(self._inputs)
            except CosimError as exc:  # e.g. NaN start input: the first fmi2DoStep discards
                self.log(f"inputs at initialization rejected: {exc}", Fmi2Status.warning)
                return
            self._inputs_pending = False
            self._outputs = None

    def do_step(self, current_time, step_size):
        if self._failure is None and (self._sim is None or not self._initialized):
            self.exit_initialization_mode()  # fmi2DoStep without initialization: do it now
        sim = self._sim
        if self._failure is not None or sim is None:
            self.log(f"fmi2DoStep(currentCommunicationPoint={current_time!r}) refused: "
                     f"{self._failure}", Fmi2Status.discard)
            return False
        pending = self._pending_params
        snapshot = sim.get_state() if pending else None
        try:
            # the step arguments are checked before the inputs are handed over, so that a
            # rejected call leaves everything (inputs included) as it was; same rules and
            # messages as Simulation.do_step
            now = sim.time
            if not (0.0 < step_size < _INF
                    and abs(current_time - now) <= _TIME_MATCH * max(1.0, abs(now))):
                finite_float("communication step h", step_size, positive=True)
                t = finite_float("communication time t", current_time)
                raise InvalidInputError(f"do_step at t={t!r} but the simulation is at t={now!r}")
            if self._inputs_pending:
                sim.set_inputs(self._inputs)  # validated: NaN/inf -> InvalidInputError, unchanged
                self._inputs_pending = False
            for key, value in pending.items():
                sim.set_parameter(key, value)
            sim.do_step(current_time, step_size)  # all or nothing
        except Exception as exc:  # noqa: BLE001 - cosim errors, and nothing may escape
            if snapshot is not None:
                self._guarded("restoring the state after a failed fmi2DoStep", sim.set_state,
                              snapshot)
                self._inputs_pending = True  # re-applied next time (idempotent)
            self.log(f"fmi2DoStep(currentCommunicationPoint={current_time!r}, "
                     f"communicationStepSize={step_size!r}) discarded, state unchanged at "
                     f"t={sim.time!r}: {type(exc).__name__}: {exc}", Fmi2Status.discard)
            return False
        if pending:
            for key, value in pending.items():
                self._params[key] = float(value)
            self._pending_params = {}
        self._outputs = None  # computed when first read
        return True

    # -- FMU state ------------------------------------------------------------------------
    def _get_fmu_state(self):
        state = _FmuState()
        state.identifier = self.modelName
        state.sim = self._sim
        state.sim_state = None if self._sim is None else self._sim.get_state()
        state.sim_blob = state.blob = state.error = None
        state.inputs = self._inputs.tolist()
        state.params = dict(self._params)
        state.solver = dict(self._solver)
        state.initialized = self._initialized
        state.start_time = self._start_time
        return state

    def _set_fmu_state(self, state):
        try:
            self._restore(state)
        except Exception as exc:  # noqa: BLE001 - see module docstring; nothing was changed
            self._fail("fmi2SetFMUstate", exc)

    def _restore(self, state):
        if not isinstance(state, _FmuState):
            raise StateError(f"not an FMU state of a cosim FMU: {type(state).__name__}")
        if state.error is not None:
            raise StateError(state.error)
        if state.identifier != self.modelName:
            raise StateError(f"FMU state belongs to {state.identifier!r}, not {self.modelName!r}")
        sim = None  # a state taken before initialization has no simulation yet
        if state.sim_state is not None or state.sim_blob is not None:
            same_config = (self._sim is not None and state.params == self._params
                           and state.solver == self._solver and state.start_time == self._start_time)
            if same_config:
                sim = self._sim
            else:
                previous = (self._params, self._solver, self._start_time)
                try:
                    self._params, self._solver = dict(state.params), dict(state.solver)
                    self._start_time = state.start_time
                    sim = self._build_simulation()
                finally:
                    self._params, self._solver, self._start_time = previous
            if state.sim_state is not None:
                sim.set_state(state.sim_state)  # all or nothing
            else:
                sim.deserialize_state(state.sim_blob)  # StateError if foreign/corrupt, unchanged
                state.sim_state, state.sim = sim.get_state(), sim  # later restores are cheap
        self._sim = sim
        self._params, self._solver = dict(state.params), dict(state.solver)
        self._start_time = state.start_time
        self._inputs = np.array(state.inputs, dtype=float)
        self._inputs_pending = True
        self._initialized = state.initialized
        self._pending_params = {}
        self._outputs = None
        self._failure = None

    @staticmethod
    def _fmu_state_to_bytes(state):
        try:
            return state.to_bytes()
        except Exception as exc:  # noqa: BLE001 - an empty blob is refused by deserialization
            state.error = f"serialization failed: {exc!r}"
            return b""

    @staticmethod
    def _fmu_state_from_bytes(blob):
        return _FmuState.from_bytes(blob)

    # -- modelDescription extras ------------------------------------------------------------
    def to_xml(self, model_options=None):
        root = super().to_xml(model_options or {})
        # UnitDefinitions right after <CoSimulation> (FMI 2.0 schema order)
        units = sorted({v.unit for v in self.vars.values() if getattr(v, "unit", None)})
        if units:
            node = Element("UnitDefinitions")
            for unit in units:
                SubElement(node, "Unit", {"name": unit})
            children = list(root)
            cs = next(i for i, c in enumerate(children) if c.tag == "CoSimulation")
            root.insert(cs + 1, node)
        # InitialUnknowns: every output is initial="calculated" (FMI 2.0 §2.2.8)
        structure = root.find("ModelStructure")
        outputs = [i for i, v in enumerate(self.vars.values(), start=1)
                   if v.causality == Fmi2Causality.output]
        if outputs:
            init = SubElement(structure, "InitialUnknowns")
            for i in outputs:
                SubElement(init, "Unknown", {"index": str(i)})
        return root
