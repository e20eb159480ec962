"""The FMI 2.0 co-simulation slave: a thin pythonfmu adapter over :class:`cosim.Simulation`.

Every FMU built by ``cosim fmu build`` ships this module (``resources/fmu/``),
the ``cosim`` core and a JSON configuration (``resources/cosim_fmu.json``)
describing the simulation and the FMI variables.  The generated slave module
subclasses :class:`CosimSlave`; all numerics stay in ``cosim``.

FMI behaviour (FMI 2.0 standard, §2.1.3 status codes and §4.2.2 fmi2DoStep):

* ``fmi2DoStep`` that cannot be performed — NaN/inf input, step size <= 0 or
  not finite, a ``currentCommunicationPoint`` different from the FMU time, a
  rejected tunable parameter, a non-converging integrator — returns
  **fmi2Discard** with a message through the logger callback (category
  ``logStatusDiscard``).  The instance stays exactly as before the call, so
  ``fmi2GetRealStatus(fmi2LastSuccessfulTime)`` reports the
  ``currentCommunicationPoint`` (an empty completed sub-interval, which is
  what fmi2Discard means for co-simulation) and the master may fix the
  inputs, retry with a smaller step, or restore a saved FMU state.
  fmi2Error is not used: per §2.1.3 it declares the instance unusable, which
  is never the case here (and pythonfmu 0.7 maps every Python exception to
  fmi2Fatal, so exceptions are kept for genuinely broken situations:
  corrupt serialized states, invalid configuration at initialization).
* Inputs are held (zero-order hold) over a communication step;
  ``canInterpolateInputs="false"``.  Events inside a step are located and
  applied inside the step; the Integer output ``event_count`` counts them.
* FMU state get/set/free and (de)serialization go through
  ``Simulation.get_state``/``set_state``/``serialize_state``/
  ``deserialize_state`` (bit-identical continuation).  A serialized FMU state
  is a :mod:`cosim.serialization` blob (versioned, checksummed, no pickle).
* No module-level mutable simulation state: every instance owns its
  configuration, its :class:`~cosim.Simulation`, its inputs and outputs.
"""
from __future__ import annotations

import json
import os
import sys
import weakref
from xml.etree.ElementTree import Element, SubElement

import numpy as np
from cosim import serialization
from cosim.errors import CosimError, InvalidInputError, StateError
from cosim.validation import finite_float
from pythonfmu import Fmi2Slave, Integer, Real, String
from pythonfmu.default_experiment import DefaultExperiment
from pythonfmu.enums import Fmi2Causality, Fmi2Initial, Fmi2Status, Fmi2Variability

CONFIG_FILE = "cosim_fmu.json"
_TIME_MATCH = 1e-12  # relative time match of fmi2DoStep's t, as in Simulation.do_step
_INF = float("inf")
CONFIG_FORMAT = "cosim-fmu-config"
STATE_KIND = "cosim.fmu"

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


def _causality(name):
    return getattr(Fmi2Causality, name)


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
    """An FMU state (fmi2FMUstate): a Simulation snapshot plus the FMU's own
    input/output buffers.  Immutable once taken; serialized lazily (cached)."""

    __slots__ = ("identifier", "sim_state", "sim_blob", "inputs", "params", "solver",
                 "initialized", "start_time", "owner", "blob")

    def to_bytes(self):
        if self.blob is None:
            sim_blob = self.sim_blob
            if sim_blob is None and self.sim_state is not None:
                owner = self.owner() if self.owner is not None else None
                if owner is None:
                    raise StateError("cannot serialize an FMU state whose instance was freed")
                sim_blob = owner._serialize_snapshot(self.sim_state)
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
        meta, data = serialization.loads(bytes(blob))
        if not isinstance(meta, dict) or meta.get("kind") != STATE_KIND:
            raise StateError("serialized FMU state was not written by a cosim FMU")
        try:
            self = cls()
            self.identifier = str(meta["identifier"])
            sim = data["sim"]
            self.sim_blob = None if sim is None else bytes(np.asarray(sim, dtype=np.uint8))
            self.sim_state = None
            self.inputs = [float(x) for x in data["inputs"]]
            self.params = dict(data["params"])
            self.solver = dict(data["solver"])
            self.initialized = bool(data["initialized"])
            self.start_time = float(data["start_time"])
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"serialized FMU state is malformed: {exc!r}") from None
        self.owner = None
        self.blob = bytes(blob)
        return self


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
        self.author = cfg.get("author")
        de = cfg.get("default_experiment") or {}
        self.default_experiment = DefaultExperiment(
            start_time=de.get("start_time"), stop_time=de.get("stop_time"),
            step_size=de.get("step_size"), tolerance=de.get("tolerance"))
        self.log_categories = dict(Fmi2Slave.log_categories)
        self.log_categories["logCosim"] = "Information from the cosim simulation (events, steps)."

        variables = cfg["variables"]
        self._input_vars = variables["inputs"]
        self._output_vars = variables["outputs"]
        self._param_vars = variables["parameters"]
        self._solver_vars = variables["solver"]
        self._inputs = [float(v["start"]) for v in self._input_vars]
        self._inputs_pending = True  # inputs not yet handed to the simulation
        self._outputs = None
        self._params = {v["key"]: float(v["start"]) for v in self._param_vars}
        self._tunable = {v["key"] for v in self._param_vars if v.get("tunable")}
        self._pending_params = {}
        self._solver = {v["key"]: v["start"] for v in self._solver_vars}
        self._start_time = float(de.get("start_time") or 0.0)
        self._sim = None
        self._initialized = False
        self._real_get = {}
        self._real_set = {}
        self._register_all()

    # -- variables -----------------------------------------------------------------------
    def _register_all(self):
        C, V = Fmi2Causality, Fmi2Variability
        for i, v in enumerate(self._input_vars):
            self._add_real(v, C.input, V.continuous, getter=lambda i=i: self._inputs[i],
                           setter=lambda x, i=i: self._set_input(i, x))
        for i, v in enumerate(self._output_vars):
            self._add_real(v, C.output, V.continuous, initial=Fmi2Initial.calculated,
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

    # fast paths for the hot loop (the base class type-checks each variable)
    def get_real(self, vrs):
        get = self._real_get
        try:
            return [get[vr]() for vr in vrs]
        except KeyError:
            bad = next(vr for vr in vrs if vr not in get)
            raise TypeError(f"variable with valueReference={bad} is not of type Real") from None

    def set_real(self, vrs, values):
        put = self._real_set
        for vr, value in zip(vrs, values):
            setter = put.get(vr)
            if setter is None:
                raise TypeError(f"variable with valueReference={vr} is not a settable Real")
            setter(value)

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
        from cosim.simulation import Simulation

        spec = dict(self._cfg["simulation"])
        params = dict(spec.pop("params", None) or {})
        params.update(self._params)
        solver = self._solver
        options = dict(spec.pop("method_options", None) or {})
        for v in self._solver_vars:
            if v.get("option"):
                options[v["key"]] = solver[v["key"]]
        step = float(solver["step"])
        return Simulation(params=params, method=str(solver["method"]), rtol=float(solver["rtol"]),
                          atol=float(solver["atol"]), h=step if step > 0.0 else None,
                          method_options=options, start_time=self._start_time, **spec)

    def _ensure_simulation(self):
        if self._sim is None:
            self._sim = self._build_simulation()
            self._inputs_pending = True
            self._refresh_outputs()
        return self._sim

    def _refresh_outputs(self):
        self._outputs = None  # recomputed from the simulation when first read

    def _events(self):
        return 0 if self._sim is None else self._sim.stats["events"]

    def setup_experiment(self, start_time, stop_time=None, tolerance=None):
        if start_time != self._start_time:
            self._start_time = float(start_time)
            self._sim = self._outputs = None

    def exit_initialization_mode(self):
        sim = self._ensure_simulation()  # a bad fixed parameter raises here (fmi2Fatal)
        self._initialized = True
        if self._inputs_pending:
            try:
                sim.set_inputs(self._inputs)
            except CosimError as exc:  # e.g. NaN start input: the first fmi2DoStep discards
                self.log(f"inputs at initialization rejected: {exc}", Fmi2Status.warning)
                return
            self._inputs_pending = False
            self._refresh_outputs()

    def do_step(self, current_time, step_size):
        sim = self._sim
        if sim is None or not self._initialized:  # no initialization call: do it now
            self.exit_initialization_mode()
            sim = self._sim
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
        except CosimError as exc:
            if snapshot is not None:
                sim.set_state(snapshot)
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

    def _output(self, i):
        out = self._outputs
        if out is None:
            out = self._outputs = self._ensure_simulation().get_outputs().tolist()
        return out[i]

    # -- FMU state ------------------------------------------------------------------------
    def _get_fmu_state(self):
        state = _FmuState()
        state.identifier = self.modelName
        state.sim_state = None if self._sim is None else self._sim.get_state()
        state.sim_blob = None
        state.inputs = list(self._inputs)
        state.params = dict(self._params)
        state.solver = dict(self._solver)
        state.initialized = self._initialized
        state.start_time = self._start_time
        state.owner = weakref.ref(self)
        state.blob = None
        return state

    def _set_fmu_state(self, state):
        if not isinstance(state, _FmuState):
            raise StateError(f"not an FMU state of a cosim FMU: {type(state).__name__}")
        if state.identifier != self.modelName:
            raise StateError(f"FMU state belongs to {state.identifier!r}, not {self.modelName!r}")
        if state.sim_state is None and state.sim_blob is None:
            sim = None  # taken before initialization
        else:
            same_config = (self._sim is not None and state.params == self._params
                           and state.solver == self._solver and state.start_time == self._start_time)
            previous = (self._params, self._solver, self._start_time)
            try:
                if same_config:
                    sim = self._sim
                else:
                    self._params, self._solver = dict(state.params), dict(state.solver)
                    self._start_time = state.start_time
                    sim = self._build_simulation()
                if state.sim_state is not None:
                    sim.set_state(state.sim_state)
                else:
                    sim.deserialize_state(state.sim_blob)  # StateError if foreign/corrupt
                    state.sim_state = sim.get_state()  # later restores are cheap
            except Exception:
                self._params, self._solver, self._start_time = previous
                raise
        self._sim = sim
        self._params, self._solver = dict(state.params), dict(state.solver)
        self._start_time = state.start_time
        self._inputs = list(state.inputs)
        self._inputs_pending = True
        self._initialized = state.initialized
        self._pending_params = {}
        self._outputs = None

    def _serialize_snapshot(self, sim_state):
        """Bytes of a Simulation snapshot (restores the current state afterwards)."""
        sim = self._sim
        current = sim.get_state()
        try:
            sim.set_state(sim_state)
            return sim.serialize_state()
        finally:
            sim.set_state(current)

    @staticmethod
    def _fmu_state_to_bytes(state):
        return state.to_bytes()

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

