"""The FMI 2.0 co-simulation slave: a thin adapter over :class:`cosim.Simulation`.

Every FMU built by ``cosim fmu build`` ships this module and the ``cosim``
core in its private package (``resources/cosim_fmu_<hex>/``, :mod:`fmu.bundle`)
and a JSON configuration (``resources/cosim_fmu.json``) describing the
simulation and the FMI variables.  The generated slave module
subclasses :class:`CosimSlave`; all numerics stay in ``cosim``.

Status codes (FMI 2.0.4 §2.1.3; the FMU binary, fmu/native/cosim_fmi2.cpp,
turns a Python exception in any entry point into **fmi2Error** with the
message logged, and ``do_step`` returning False into **fmi2Discard**):

* **fmi2Error**, nothing changed: an unknown or wrong-type value reference
  (§2.1.7), a fixed parameter or solver setting set after initialization
  (§2.1.7, variability ``fixed``), ``fmi2DoStep`` whose
  ``currentCommunicationPoint`` is not the FMU time or whose step size is not
  > 0 (§4.2.2), an invalid tolerance (§2.1.6), a corrupt, truncated, foreign or
  inconsistent serialized FMU state at ``fmi2DeSerializeFMUstate`` (§2.1.8), an
  FMU state handle this instance did not hand out or that was freed (the binary
  keeps a table of its live handles; a foreign pointer is never dereferenced).
* **fmi2Error**, nothing changed: a call in the wrong FMI state (§4.2.4 state
  machine: instantiated, initializationMode, stepComplete, terminated, error),
  logged as ``fmi2DoStep: InvalidInputError: fmi2DoStep is not allowed in state
  terminated; only in stepComplete (FMI 2.0.4 §4.2.4); nothing changed``:
  fmi2SetupExperiment and fmi2EnterInitializationMode only when instantiated,
  fmi2ExitInitializationMode only in initialization mode, fmi2DoStep and
  fmi2Terminate only in stepComplete, fmi2Set<Type> only before fmi2Terminate and
  not in error, fmi2Get<Type>Status only in stepComplete or terminated.  Getters
  and the FMU-state functions are allowed in every state (getters also when
  instantiated, where FMI 2.0.4 leaves them undefined).  A discarded step leaves
  the state as it was, so the instance stays in stepComplete (no stepFailed).
  fmi2SetFMUstate restores the FMI state the handle was taken in.
* **fmi2Error** at ``fmi2ExitInitializationMode`` for a configuration the
  simulation rejects (e.g. ``l = -1``); the instance is then *failed*: every
  ``fmi2DoStep`` is fmi2Error with that message until ``fmi2Reset`` or an
  ``fmi2SetFMUstate`` with a valid state (the recovery §2.1.3 allows).
* **fmi2Discard** from ``fmi2DoStep`` (§4.2.2), state exactly as before the
  call and ``fmi2LastSuccessfulTime`` = ``currentCommunicationPoint``: NaN/inf
  input, a rejected tunable parameter, a failing integration; the master may
  fix the inputs, retry with a smaller step or restore a state;
  ``fmi2Terminated`` stays false.
* **Terminal event** (e.g. the bouncing ball stops): the step ends at the
  event, ``fmi2DoStep`` returns fmi2Discard with ``fmi2LastSuccessfulTime`` =
  the event time and ``fmi2Terminated`` = true (§4.2.3); outputs are those at
  the event; the master should call ``fmi2Terminate`` (a later fmi2DoStep is
  fmi2Error).
* ``fmi2SetupExperiment(toleranceDefined=true, tolerance)`` sets the
  relative tolerance of adaptive methods (§2.1.6); a later
  ``fmi2SetReal(solver.rtol)`` in initialization overrides it.
* Outputs with direct feedthrough (``<ModelStructure>`` lists their inputs)
  are recomputed by ``fmi2GetReal`` after ``fmi2SetReal`` of an input, also
  between steps; the inputs are handed to the simulation then (§4.2.1).
* Inputs are held (zero-order hold) over a communication step;
  ``canInterpolateInputs="false"``.  Events inside a step are located and
  applied inside the step; the Integer output ``event_count`` counts them.
* FMU state get/set/free and (de)serialization go through
  ``Simulation.get_state``/``set_state``/``serialize_state``/
  ``deserialize_state`` (bit-identical continuation); a serialized FMU state
  is a :mod:`cosim.serialization` blob (versioned, checksummed, no pickle).
* Hot path: the FMU binary shares one float64 buffer with the slave
  (``_fmi_layout``: a pending-inputs flag, an outputs-valid flag, the inputs,
  the outputs); ``fmi2SetReal`` of inputs and ``fmi2GetReal`` of inputs and
  valid outputs run in C on it, ``fmi2DoStep`` is one call of ``do_step``
  (whose common case skips re-deriving what cannot have changed, and which
  stores the new outputs); anything else goes through the checked methods.
* No module-level simulation state: every instance owns its configuration,
  its :class:`~cosim.Simulation`, its inputs and outputs.  The FMU imports
  this module from its private package (:mod:`fmu.bundle`).
"""
from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import uuid
from xml.etree.ElementTree import Element, SubElement

import numpy as np
from cosim import serialization
from cosim.errors import CosimError, InvalidInputError, StateError
from cosim.validation import MAX_INPUT, finite_float
from pythonfmu.fmi2slave import Fmi2Slave
from pythonfmu.default_experiment import DefaultExperiment
from pythonfmu.enums import Fmi2Causality, Fmi2Initial, Fmi2Status, Fmi2Variability
from pythonfmu.variables import Integer, Real, String

CONFIG_FILE = "cosim_fmu.json"
CONFIG_FORMAT = "cosim-fmu-config"
STATE_KIND = "cosim.fmu"
_TIME_MATCH = 1e-12  # relative match of fmi2DoStep's t with the FMU time, as Simulation.do_step
_INF = math.inf

# FMI 2.0.4 §4.2.4 co-simulation states.  A discarded step leaves the state exactly as it
# was, so the instance stays in stepComplete (no stepFailed); the slave's phase lives in
# the buffer shared with the FMU binary (_fmi_layout), which reads it on its own paths.
INSTANTIATED, INITIALIZATION_MODE, STEP_COMPLETE, TERMINATED, ERROR = range(5)
PHASE_NAMES = ("instantiated", "initializationMode", "stepComplete", "terminated", "error")
_SETUP = (INSTANTIATED,)  # fmi2SetupExperiment, fmi2EnterInitializationMode
_EXIT = (INITIALIZATION_MODE,)
_SET = (INSTANTIATED, INITIALIZATION_MODE, STEP_COMPLETE)  # fmi2Set<Type>
_STEP = (STEP_COMPLETE,)  # fmi2DoStep, fmi2Terminate
_STATUS = (STEP_COMPLETE, TERMINATED)  # fmi2Get<Type>Status



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


class _NoVariable:
    """Type of the variables an FMU does not have (every reference is unknown)."""


class _FmuState:
    """An fmi2FMUstate: a deep copy of the Simulation's snapshot plus the FMU's input
    buffer, settings and FMI state (§2.1.8: independent of the instance, usable any number
    of times until freed).  Never changed once taken; serialized lazily (and cached) by
    ``sim.serialize_snapshot``, which touches no live simulation (``sim`` only gives
    the configuration)."""

    __slots__ = ("identifier", "sim", "sim_state", "inputs", "params", "solver", "initialized",
                 "phase", "start_time", "blob")

    def to_bytes(self):
        if self.blob is None:
            sim_blob = None if self.sim_state is None else self.sim.serialize_snapshot(
                self.sim_state)
            data = {
                "sim": None if sim_blob is None else np.frombuffer(sim_blob, dtype=np.uint8),
                "inputs": np.array(self.inputs, dtype=float),
                "params": dict(self.params),
                "solver": dict(self.solver),
                "initialized": bool(self.initialized),
                "phase": int(self.phase),
                "start_time": float(self.start_time),
            }
            self.blob = serialization.dumps(data, meta={"kind": STATE_KIND,
                                                        "identifier": self.identifier})
        return self.blob


IC_CATEGORY = "cosimInitialConditions"
RUNTIME_CATEGORY = "cosimRuntime"
SETTINGS_CATEGORY = "cosimSettings"
COMPILE_CATEGORY = "cosimCompilation"


class CosimSlave(Fmi2Slave):
    """FMI 2.0 CS slave running one :class:`cosim.Simulation` (see module docstring).

    The generated module defines ``class <Identifier>(CosimSlave)``; all
    behaviour comes from the JSON configuration in the resources folder.
    """

    # FMI 2.0.4 §2.2.4 LogCategories: the IC report (issue 19) has its own category
    log_categories = dict(Fmi2Slave.log_categories, **{
        IC_CATEGORY: "what the initial-condition analysis (seed 000 Algorithm 1) changed at the "
                     "start: fmi2Warning when it repaired the initial state, fmi2OK otherwise",
        RUNTIME_CATEGORY: "which Python interpreter and which backend run the model: fmi2Warning "
                          "when the python backend runs instead of the compiled one (and why), "
                          "fmi2OK otherwise",
        SETTINGS_CATEGORY: "settings the importer chose: fmi2Warning when the tolerance of "
                           "fmi2SetupExperiment replaces the FMU's own (fmi2OK when it equals "
                           "it), or when the run to its stopTime would take another method "
                           "10 times fewer steps",
        COMPILE_CATEGORY: "what the compiled backend compiles on this machine (once per method "
                          "and model, then cached) and how long it took, as it happens"})

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        resources = self.resources
        with open(os.path.join(resources, CONFIG_FILE), encoding="utf-8") as fh:
            cfg = json.load(fh)
        if cfg.get("format") != CONFIG_FORMAT:
            raise ValueError(f"{CONFIG_FILE} in {resources!r} is not a cosim FMU configuration")
        self._cfg = cfg
        self.guid = uuid.UUID(cfg["guid"])  # written to modelDescription.xml, checked at instantiation
        self.modelName = cfg["identifier"]
        self.description = cfg.get("description") or None
        self.version = cfg.get("cosim_version")
        de = cfg.get("default_experiment") or {}
        self.default_experiment = DefaultExperiment(
            start_time=de.get("start_time"), stop_time=de.get("stop_time"),
            step_size=de.get("step_size"), tolerance=de.get("tolerance"))
        # user code specs (module:attr) live in this FMU's private package
        self._package = __name__.rpartition(".fmu.slave")[0] if __name__.endswith(".fmu.slave") else ""

        variables = cfg["variables"]
        self._input_vars = variables["inputs"]
        self._output_vars = variables["outputs"]
        self._param_vars = variables["parameters"]
        self._solver_vars = variables["solver"]
        # one float64 buffer shared with the FMU binary (fmu/native/cosim_fmi2.cpp), which
        # sets inputs and reads outputs in it without calling Python (_fmi_layout):
        # [inputs pending, outputs valid, FMI state, inputs..., outputs...]; never reallocated
        n_in, n_out = len(self._input_vars), len(self._output_vars)
        self._shared = np.zeros(3 + n_in + n_out, dtype=float)
        self._flags = memoryview(self._shared)  # [0..2] as Python floats (cheaper than numpy)
        self._inputs = self._shared[3:3 + n_in]  # written in place only
        self._outbuf = self._shared[3 + n_in:]  # outputs at the current time when valid
        self._inputs[:] = [float(v["start"]) for v in self._input_vars]
        self._inputs_pending = True  # inputs not yet handed to the simulation
        self._params = {v["key"]: float(v["start"]) for v in self._param_vars}
        self._block_params = {v["key"] for v in self._param_vars if v.get("block")}
        self._tunable = {v["key"] for v in self._param_vars if v.get("tunable")}
        self._pending_params = {}
        self._solver = {v["key"]: v["start"] for v in self._solver_vars}
        self._built_experiment = (de.get("stop_time"), dict(self._solver))  # the build's step-budget check
        self._start_time = float(de.get("start_time") or 0.0)
        self._stop_time = None   # fmi2SetupExperiment's stopTime, when the importer defines it
        self._sim = None
        self._phase = INSTANTIATED
        self._failure = None  # why the instance cannot step (module docstring)
        self._last_time = self._start_time  # fmi2LastSuccessfulTime
        self._terminated = False  # fmi2Terminated
        self.native_steps = 0  # fmi2DoStep calls the binary ran without Python (_native_arm)
        self._real_get = {}
        self._real_set = {}
        self._register_all()
        self._live_settable = {vr for vr, var in self.vars.items()  # after initialization
                               if vr in self._real_set and not (
                                   var.causality == Fmi2Causality.parameter
                                   and var.variability == Fmi2Variability.fixed)}

    # -- the buffer shared with the FMU binary ---------------------------------------------
    @property
    def _inputs_pending(self):
        """Inputs set since they were last handed to the simulation (also by the binary)."""
        return self._flags[0] != 0.0

    @_inputs_pending.setter
    def _inputs_pending(self, value):
        self._flags[0] = 1.0 if value else 0.0

    @property
    def _outputs(self):
        """Output values at the current time and inputs (a copy), or None when they must
        be computed; setting None invalidates them (the binary does so on an input)."""
        return self._outbuf.tolist() if self._flags[1] != 0.0 else None

    @_outputs.setter
    def _outputs(self, values):
        if values is None:
            self._flags[1] = 0.0
        else:
            self._outbuf[:] = values
            self._flags[1] = 1.0

    @property
    def _phase(self):
        """The FMI state (§4.2.4: INSTANTIATED ... ERROR), also read by the binary."""
        return int(self._flags[2])

    @_phase.setter
    def _phase(self, value):
        self._flags[2] = float(value)

    @property
    def _initialized(self):
        """After fmi2ExitInitializationMode (stepComplete, terminated, or error after it)."""
        return self._flags[2] >= STEP_COMPLETE

    def _require(self, call, allowed):
        """fmi2Error (nothing changed) for ``call`` outside the FMI states ``allowed``."""
        phase = self._phase
        if phase not in allowed:
            why = f" ({self._failure})" if phase == ERROR and self._failure else ""
            raise InvalidInputError(
                f"{call} is not allowed in state {PHASE_NAMES[phase]}{why}; only in "
                f"{', '.join(PHASE_NAMES[p] for p in allowed)} (FMI 2.0.4 §4.2.4); "
                f"nothing changed")

    def _fmi_layout(self):
        """For the FMU binary: (shared buffer, its address, input value references, output
        value references) -- fmi2SetReal of inputs and fmi2GetReal of inputs and valid
        outputs then run in C; anything else calls the methods below."""
        return (self._shared, int(self._shared.ctypes.data), tuple(self._input_vrs),
                tuple(self._output_vrs))

    # -- variables -----------------------------------------------------------------------
    def _register_all(self):
        C, V = Fmi2Causality, Fmi2Variability
        self._input_vrs = [  # value reference of input i, output i (in _shared)
            self._add_real(v, C.input, V.continuous, getter=lambda i=i: float(self._inputs[i]),
                           setter=lambda x, i=i: self._set_input(i, x))
            for i, v in enumerate(self._input_vars)]
        self._output_vrs = [
            self._add_real(v, C.output, V.discrete if v.get("discrete") else V.continuous,
                           initial=Fmi2Initial.calculated, getter=lambda i=i: self._output(i))
            for i, v in enumerate(self._output_vars)]
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
        return var.value_reference

    # -- fmi2Get*/fmi2Set* (§2.1.7): an unknown reference is fmi2Error, nothing changed ------
    def _variables(self, vrs, kind, what):
        found = []
        for vr in vrs:
            var = self.vars.get(vr)
            if not isinstance(var, kind):
                raise InvalidInputError(f"valueReference {vr} is not {what} variable of "
                                        f"{self.modelName}")
            found.append(var)
        return found

    def get_real(self, vrs):
        get = self._real_get
        try:
            return [get[vr]() for vr in vrs]
        except KeyError:
            bad = next(vr for vr in vrs if vr not in get)
            raise InvalidInputError(f"valueReference {bad} is not a Real variable of "
                                    f"{self.modelName}") from None

    def set_real(self, vrs, values):
        if self._flags[2] > STEP_COMPLETE:
            self._require("fmi2SetReal", _SET)
        put = self._real_set
        try:
            setters = [put[vr] for vr in vrs]
        except KeyError:
            bad = next(vr for vr in vrs if vr not in put)
            kind = "an output" if bad in self._real_get else "not a Real variable"
            raise InvalidInputError(f"valueReference {bad} is {kind} of {self.modelName}; "
                                    f"it cannot be set") from None
        if self._initialized and not self._live_settable.issuperset(vrs):
            for vr in vrs:  # all or nothing: check every variability first (§2.1.7)
                self._check_settable(self.vars[vr])
        for setter, value in zip(setters, values):
            setter(value)

    def _check_settable(self, var):
        if var.causality == Fmi2Causality.parameter and var.variability == Fmi2Variability.fixed:
            raise InvalidInputError(
                f"{var.name!r} is a fixed parameter: it can only be set before "
                f"fmi2ExitInitializationMode (FMI 2.0.4 §2.1.7); value unchanged")

    def get_integer(self, vrs):
        return [int(v.getter()) for v in self._variables(vrs, Integer, "an Integer")]

    def set_integer(self, vrs, values):
        self._require("fmi2SetInteger", _SET)
        for var in self._variables(vrs, Integer, "an Integer"):  # only outputs
            raise InvalidInputError(f"{var.name!r} is an output; it cannot be set")

    def get_boolean(self, vrs):
        return self._variables(vrs, _NoVariable, "a Boolean")  # there are none

    def set_boolean(self, vrs, values):
        self._require("fmi2SetBoolean", _SET)
        self._variables(vrs, _NoVariable, "a Boolean")

    def get_string(self, vrs):
        return [str(v.getter()) for v in self._variables(vrs, String, "a String")]

    def set_string(self, vrs, values):
        self._require("fmi2SetString", _SET)
        variables = self._variables(vrs, String, "a String")
        for var in variables:
            if self._initialized:
                self._check_settable(var)
        for var, value in zip(variables, values):
            var.setter(value)

    def _set_input(self, i, value):
        # validated when handed to the simulation (getReal of an output, or fmi2DoStep)
        self._inputs[i] = value
        self._inputs_pending = True
        self._outputs = None

    def _set_param(self, key, value):
        if not self._initialized:
            self._params[key] = value
            self._sim = self._outputs = None  # (re)built with the new value at initialization
        elif key in self._tunable:
            self._pending_params[key] = value  # applied (validated) at the next fmi2DoStep
        else:
            raise InvalidInputError(f"parameter {key!r} is fixed")

    def _set_solver(self, key, value):
        if self._initialized:
            raise InvalidInputError(f"solver setting {key!r} is fixed")
        self._solver[key] = value
        self._sim = self._outputs = None

    # -- simulation ----------------------------------------------------------------------
    def _private(self, spec):
        """A ``module:attr`` spec as imported from this FMU's private package: one of the
        library's block functions, the bundled ``fmu.examples``, or code of a module bundled
        by ``cosim fmu build`` (``user_modules`` of the configuration); anything else is
        refused unimported."""
        if isinstance(spec, str) and ":" in spec:
            from cosim.code_refs import BLOCK_FUNCTIONS
            module = spec.partition(":")[0]
            if not (spec in BLOCK_FUNCTIONS or module == "fmu.examples"
                    or module.split(".")[0] in (self._cfg.get("user_modules") or ())):
                raise InvalidInputError(f"FMU configuration names code {spec[:80]!r} that this FMU "
                                        f"does not bundle (nothing was imported)")
            if self._package:
                return f"{self._package}.{spec}"
        return spec

    def simulation_spec(self):
        """This FMU's configuration -- its scenario or model, the ``solver.*`` values and the
        parameters the importer set -- as the :class:`cosim.SimulationSpec` it runs (the one
        translation; errors are the spec's).  The importer picks the communication step."""
        from cosim.blocks import spec_with_parameters
        from cosim.spec import SimulationSpec

        cfg = dict(self._cfg["simulation"])
        solver = self._solver
        options = {v["key"]: solver[v["key"]] for v in self._solver_vars if v.get("option")}
        step = float(solver["step"])
        data = dict(cfg["scenario"]) if "scenario" in cfg else cfg
        if "model" in data:
            data["model"] = self._private(data["model"])
        tuned = {}  # the blocks' tunable parameters ("block.name"), into their block specs
        for key in self._block_params:
            block, _, name = key.partition(".")
            tuned.setdefault(block, {})[name] = self._params[key]
        data["blocks"] = [spec_with_parameters(b, tuned[b.get("name")])
                          if isinstance(b, dict) and b.get("name") in tuned else b
                          for b in data.get("blocks") or ()]
        data["blocks"] = [dict(b, function=self._private(b["function"]))
                          if isinstance(b, dict) and "function" in b else b
                          for b in data["blocks"]]
        data["params"] = dict(data.get("params") or {}, **{k: v for k, v in self._params.items()
                                                           if k not in self._block_params})
        data["method_options"] = dict(data.get("method_options") or {}, **options)
        data.update(method=str(solver["method"]), rtol=float(solver["rtol"]),
                    atol=float(solver["atol"]), h=step if step > 0.0 else None,
                    start_time=self._start_time, communication_step=None)
        if not float(data.get("stop_time") or 0.0) > self._start_time:
            data["stop_time"] = None  # the master decides when to stop
        return SimulationSpec.from_dict(data, source=f"FMU {self.modelName}")

    def _build_simulation(self):
        from cosim.simulation import Simulation
        sim = Simulation.from_spec(self.simulation_spec())
        # an input the model clips (a URDF effort limit): once per input, fmi2Warning (seen
        # where a step goes through Python: the binary's own steps do not look at inputs)
        sim.on_notice = lambda message: self.log(message, Fmi2Status.warning)
        return sim

    @contextlib.contextmanager
    def _compile_notices(self):
        """cosim.jit's compile notices (what, an estimate, progress, time) also to the
        FMI logger while the body runs."""
        from cosim import jit

        def listener(message):
            self.log(message, Fmi2Status.ok, COMPILE_CATEGORY)
        jit.listeners.append(listener)
        try:
            yield
        finally:
            jit.listeners.remove(listener)

    def _ensure_simulation(self):
        if self._sim is None:
            with self._compile_notices():
                self._sim = self._build_simulation()
            self._inputs_pending = True
            self._outputs = None
            self._log_backend(self._sim)
            report = self._sim.ic_report
            if report is not None:  # logged once per simulation (fmi2OK only with debug logging)
                self.log(report.one_line(), Fmi2Status.warning if report.repaired else Fmi2Status.ok,
                         IC_CATEGORY)
        return self._sim

    def _log_backend(self, sim):
        """Which backend runs, once per simulation: fmi2Warning when the python backend runs
        although the compiled one was wanted ("auto" or "numba"), with the reason."""
        if sim.backend == "numba":
            self.log(f"backend numba (compiled) runs {sim.method}", Fmi2Status.ok, RUNTIME_CATEGORY)
        elif sim.requested_backend == "python":
            self.log(f"backend python runs {sim.method} (the FMU was built with backend python)",
                     Fmi2Status.ok, RUNTIME_CATEGORY)
        else:
            why = sim.backend_reason or "the compiled backend cannot run it"
            hint = ""
            if "numba is not importable" in why:
                numba = next((p for p in (self._cfg.get("host") or {}).get("packages", ())
                              if p.get("module") == "numba"), None)
                hint = f"; install {numba['pip'] if numba else 'numba'} in this Python for it"
            self.log(f"backend python runs {sim.method}, not the compiled one: {why}{hint}",
                     Fmi2Status.warning, RUNTIME_CATEGORY)

    def _output(self, i):
        if self._flags[1] == 0.0:
            self._refresh_outputs()
        return float(self._outbuf[i])

    def _refresh_outputs(self):
        """Compute the outputs at the current time and inputs into the shared buffer
        (called by the FMU binary's fmi2GetReal when they are not valid)."""
        if self._failure is not None:
            raise InvalidInputError(self._failure)
        sim = self._ensure_simulation()
        if self._inputs_pending:  # direct feedthrough: outputs see the inputs just set
            sim.set_inputs(self._inputs)  # NaN/inf -> fmi2Error here, fmi2Discard at doStep
            self._inputs_pending = False
        self._outputs = sim.get_outputs()

    def _events(self):
        return 0 if self._sim is None else self._sim.stats["events"]

    def setup_experiment(self, start_time, stop_time=None, tolerance=None):
        self._require("fmi2SetupExperiment", _SETUP)
        start_time = finite_float("fmi2SetupExperiment startTime", start_time)
        if tolerance is not None:  # §2.1.6: the tolerance of the step-size control
            tolerance = finite_float("fmi2SetupExperiment tolerance", tolerance, positive=True)
            own = float(self._solver["rtol"])
            self._set_solver("rtol", tolerance)
            if tolerance == own:
                self.log(f"fmi2SetupExperiment: relative tolerance {tolerance!r} (solver.rtol, the "
                         f"FMU's own)", Fmi2Status.ok, SETTINGS_CATEGORY)
            else:
                self.log(f"fmi2SetupExperiment: the importer's tolerance {tolerance!r} replaces the "
                         f"FMU's relative tolerance {own!r} (solver.rtol); results differ from a run "
                         f"at {own!r}", Fmi2Status.warning, SETTINGS_CATEGORY)
        if stop_time is not None:
            stop_time = finite_float("fmi2SetupExperiment stopTime", stop_time)
        self._stop_time = stop_time if stop_time is not None and stop_time > start_time else None
        if start_time != self._start_time:
            self._start_time = start_time
            self._last_time = start_time
            self._sim = self._outputs = None

    def enter_initialization_mode(self):
        self._require("fmi2EnterInitializationMode", _SETUP)
        self._phase = INITIALIZATION_MODE

    def exit_initialization_mode(self):
        self._require("fmi2ExitInitializationMode", _EXIT)
        self._phase = STEP_COMPLETE
        try:
            sim = self._ensure_simulation()  # a bad fixed parameter fails here
            if self._inputs_pending:
                sim.set_inputs(self._inputs)
                self._inputs_pending = False
                self._outputs = None
            self._check_step_budget(sim)
        except Exception as exc:
            self._outputs = None
            self._phase = ERROR
            self._failure = (f"fmi2ExitInitializationMode failed: {type(exc).__name__}: {exc}; "
                             f"call fmi2Reset or fmi2SetFMUstate with a valid state")
            raise

    def _check_step_budget(self, sim):
        """With the run's end known (fmi2SetupExperiment's stopTime) and its communication
        step (the DefaultExperiment's stepSize), and the importer's stopTime or solver
        settings other than those ``cosim fmu build`` checked: a tolerance the method cannot
        reach within max_steps per communication step is refused here (fmi2Error), one that
        another method reaches 10× cheaper is an fmi2Warning (:func:`cosim.step_budget.check`)."""
        import warnings  # noqa: PLC0415
        from cosim import step_budget  # noqa: PLC0415
        dt = self.default_experiment.step_size
        if self._stop_time is None or not dt or not self._stop_time > sim.time:
            return
        if (self._stop_time, self._solver) == self._built_experiment:
            return   # checked by cosim fmu build
        span = self._stop_time - sim.time
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", step_budget.TightToleranceWarning)
            step_budget.check(sim, self._stop_time, min(float(dt), span), math.ceil(span / float(dt)),
                              driven=True)
        for w in caught:
            self.log(str(w.message), Fmi2Status.warning, SETTINGS_CATEGORY)

    def terminate(self):
        self._require("fmi2Terminate", _STEP)
        self._phase = TERMINATED

    def terminated(self):
        self._require("fmi2GetBooleanStatus", _STATUS)
        return self._terminated

    def last_successful_time(self):
        self._require("fmi2GetRealStatus", _STATUS)
        return self._last_time

    def do_step(self, current_time, step_size):
        sim = self._sim
        # the common case (initialized, running, at the FMU's time, no parameter change):
        # the same as _do_step below without re-deriving what cannot have changed
        if sim is not None and 0.0 < step_size < _INF and (
                current_time == (now := sim.time)  # a master adding h as the FMU does
                or abs(current_time - now) <= _TIME_MATCH * max(1.0, abs(now))) \
                and self._flags[2] == STEP_COMPLETE and not self._terminated \
                and not self._pending_params:
            flags = self._flags
            try:
                if flags[0] != 0.0:  # inputs set since the last hand-over
                    sim.set_inputs(self._inputs)  # validated: NaN/inf -> discard, unchanged
                    flags[0] = 0.0
                t_end = sim.do_step(current_time, step_size)  # all or nothing
            except Exception as exc:  # noqa: BLE001 - §4.2.2: fmi2Discard, state unchanged
                self._last_time = now
                self._log_discard(current_time, step_size, exc)
                return False
            return self._stepped(sim, t_end)
        return self._do_step(current_time, step_size)

    def _log_discard(self, current_time, step_size, exc):
        self.log(f"fmi2DoStep(currentCommunicationPoint={current_time!r}, "
                 f"communicationStepSize={step_size!r}) discarded, state unchanged at "
                 f"t={self._sim.time!r}: {type(exc).__name__}: {exc}", Fmi2Status.discard)

    def _stepped(self, sim, t_end):
        """After a completed fmi2DoStep to ``t_end``: outputs, terminal event (§4.2.3)."""
        try:  # read next by the master: computed in this call (the binary's one Python call)
            sim.outputs_into(self._outbuf)
            self._flags[1] = 1.0
        except Exception:  # noqa: BLE001 - computed (and raised) again when read
            self._flags[1] = 0.0
        if sim.stopped:  # terminal event in this step: it ends there (§4.2.3)
            self._terminated = True
            self._last_time = float(sim.stop_time)
            self.log(f"terminal event at t={self._last_time!r}: fmi2Terminated is true",
                     Fmi2Status.discard)
            return False
        self._last_time = t_end
        return True

    # -- the binary's own steps (cosim_fmi2.cpp "native step") ------------------------------
    def _native_arm(self):
        """After a completed fmi2DoStep, for the FMU binary: the compiled record it
        may step itself (fmi2DoStep with the plain checks of :meth:`do_step`, new
        inputs written in place, outputs copied into the shared buffer) until it
        next calls Python, which it then first reports through :meth:`_native_sync`
        -- or None (then every fmi2DoStep calls :meth:`do_step`).  The tuple:
        (the compiled entry and arrays the binary keeps alive, integers, floats),
        see ``Component::arm`` in the binary.
        ``COSIM_FMU_NATIVE=0`` in the environment turns it off."""
        sim = self._sim
        if (sim is None or self._flags[2] != STEP_COMPLETE
                or self._terminated or self._pending_params or self._flags[0] != 0.0
                or self._flags[1] == 0.0 or os.environ.get("COSIM_FMU_NATIVE", "1") == "0"):
            return None
        with self._compile_notices():
            rec = sim.native_step_record()
        if rec is None:
            return None
        address, entry, S, I, LU, u, p, y_out, functions, budget, t_slot, budget_span, time_match = rec
        if u.size != self._inputs.size or y_out.size != self._outbuf.size:
            return None
        arrays = (entry, S, I, LU, u, p, y_out, functions)  # kept alive by the binary while it steps
        ints = (address, S.ctypes.data, S.size, I.ctypes.data, I.size, LU.ctypes.data,
                LU.shape[0], LU.shape[1], u.ctypes.data, u.size, p.ctypes.data, p.size,
                y_out.ctypes.data, y_out.size, int(budget), int(t_slot), functions.ctypes.data,
                functions.shape[0])
        return arrays, tuple(int(i) for i in ints), (float(budget_span), float(time_match), MAX_INPUT)

    def _native_sync(self, n_steps):
        """The binary took ``n_steps`` fmi2DoStep calls itself since :meth:`_native_arm`:
        the simulation's time and step count, and fmi2LastSuccessfulTime, catch up."""
        sim = self._sim
        sim.native_steps_done(n_steps)
        self._last_time = sim.time
        self.native_steps += int(n_steps)

    def _do_step(self, current_time, step_size):
        # usage errors (§4.2.2, §4.2.4): fmi2Error, nothing changed
        self._require("fmi2DoStep", _STEP)
        sim = self._sim
        if self._terminated:
            raise InvalidInputError(
                f"the simulation terminated at t={self._last_time!r} (fmi2Terminated is true); "
                f"fmi2DoStep is not allowed until fmi2Reset or fmi2SetFMUstate (FMI 2.0.4 §4.2.3)")
        now = sim.time
        if not (0.0 < step_size < _INF
                and abs(current_time - now) <= _TIME_MATCH * max(1.0, abs(now))):
            finite_float("communicationStepSize", step_size, positive=True)
            t = finite_float("currentCommunicationPoint", current_time)
            raise InvalidInputError(f"fmi2DoStep at currentCommunicationPoint={t!r} but the FMU "
                                    f"is at t={now!r} (FMI 2.0.4 §4.2.2)")
        pending = self._pending_params
        snapshot = sim.get_state() if pending else None
        self._last_time = now
        try:
            if self._inputs_pending:
                sim.set_inputs(self._inputs)  # validated: NaN/inf -> InvalidInputError, unchanged
                self._inputs_pending = False
            for key, value in pending.items():
                sim.set_parameter(key, value)
            t_end = sim.do_step(current_time, step_size)  # all or nothing
        except Exception as exc:  # noqa: BLE001 - §4.2.2: fmi2Discard, state unchanged
            if snapshot is not None:
                sim.set_state(snapshot)
                self._inputs_pending = True  # re-applied next time (idempotent)
            self._log_discard(current_time, step_size, exc)
            return False
        if pending:
            for key, value in pending.items():
                self._params[key] = float(value)
            self._pending_params = {}
        return self._stepped(sim, t_end)

    # -- FMU state (§2.1.8) ---------------------------------------------------------------
    def _get_fmu_state(self):
        state = _FmuState()
        state.identifier = self.modelName
        state.sim = self._sim
        state.sim_state = None if self._sim is None else copy.deepcopy(self._sim.get_state())
        state.blob = None
        state.inputs = self._inputs.tolist()
        state.params = dict(self._params)
        state.solver = copy.deepcopy(self._solver)
        # after a failed fmi2ExitInitializationMode: the state before it (set, then exit again)
        state.phase = INITIALIZATION_MODE if self._phase == ERROR else self._phase
        state.initialized = state.phase >= STEP_COMPLETE
        state.start_time = self._start_time
        return state

    def _scratch_simulation(self, params, solver, start_time):
        previous = (self._params, self._solver, self._start_time)
        try:
            self._params, self._solver, self._start_time = dict(params), dict(solver), start_time
            return self._build_simulation()
        finally:
            self._params, self._solver, self._start_time = previous

    def _set_fmu_state(self, state):
        if not isinstance(state, _FmuState):
            raise StateError(f"not an FMU state of a cosim FMU: {type(state).__name__}")
        if state.identifier != self.modelName:
            raise StateError(f"FMU state belongs to {state.identifier!r}, not {self.modelName!r}")
        sim = None  # a state taken before initialization has no simulation yet
        if state.sim_state is not None:
            same_config = (self._sim is not None and state.params == self._params
                           and state.solver == self._solver and state.start_time == self._start_time)
            sim = self._sim if same_config else self._scratch_simulation(
                state.params, state.solver, state.start_time)
            sim.set_state(copy.deepcopy(state.sim_state))  # all or nothing; the handle stays as it is
        self._sim = sim
        self._params, self._solver = dict(state.params), copy.deepcopy(state.solver)
        self._start_time = state.start_time
        self._inputs[:] = state.inputs  # in place: the FMU binary holds the buffer
        self._inputs_pending = True
        self._phase = state.phase
        self._pending_params = {}
        self._outputs = None
        self._failure = None
        self._terminated = bool(sim is not None and sim.stopped)
        self._last_time = float(sim.stop_time) if self._terminated else (
            sim.time if sim is not None else self._start_time)

    @staticmethod
    def _fmu_state_to_bytes(state):
        if not isinstance(state, _FmuState):
            raise StateError(f"not an FMU state of a cosim FMU: {type(state).__name__}")
        return state.to_bytes()

    def _fmu_state_from_bytes(self, blob):
        """Parse and fully validate a serialized FMU state (§2.1.8): a corrupt,
        truncated, foreign or inconsistent blob raises (fmi2Error) here."""
        meta, data = serialization.loads(bytes(blob))  # magic, version, checksum, structure
        if not isinstance(meta, dict) or meta.get("kind") != STATE_KIND:
            raise StateError("serialized FMU state was not written by a cosim FMU")
        if meta.get("identifier") != self.modelName:
            raise StateError(f"serialized FMU state belongs to {meta.get('identifier')!r:.80}, "
                             f"not {self.modelName!r}")
        try:
            state = _FmuState()
            state.identifier = self.modelName
            state.inputs = [float(x) for x in np.asarray(data["inputs"], dtype=float).reshape(-1)]
            state.params = {str(k): float(v) for k, v in dict(data["params"]).items()}
            state.solver = dict(data["solver"])
            state.initialized = bool(data["initialized"])
            phase = data.get("phase", STEP_COMPLETE if state.initialized else INSTANTIATED)
            if isinstance(phase, bool) or phase not in (INSTANTIATED, INITIALIZATION_MODE,
                                                        STEP_COMPLETE, TERMINATED):
                raise ValueError(f"phase must be 0..3, got {phase!r:.40}")
            state.phase = int(phase)
            if state.initialized != (state.phase >= STEP_COMPLETE):
                raise ValueError(f"initialized={state.initialized} contradicts the FMI state "
                                 f"{PHASE_NAMES[state.phase]}")
            state.start_time = finite_float("start_time", data["start_time"])
            sim_blob = data["sim"]
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"serialized FMU state is malformed: {exc!r:.200}") from None
        if len(state.inputs) != len(self._input_vars):
            raise StateError(f"serialized FMU state has {len(state.inputs)} inputs, this FMU "
                             f"{len(self._input_vars)}")
        if set(state.params) != set(self._params) or set(state.solver) != set(self._solver):
            raise StateError("serialized FMU state has the parameters of a different FMU")
        state.blob = bytes(blob)
        state.sim = state.sim_state = None
        if sim_blob is not None:  # restore it into a scratch simulation: full validation
            sim = self._scratch_simulation(state.params, state.solver, state.start_time)
            sim.deserialize_state(bytes(np.asarray(sim_blob, dtype=np.uint8)))
            state.sim, state.sim_state = sim, sim.get_state()
        return state

    # -- modelDescription extras ------------------------------------------------------------
    def to_xml(self, model_options=None):
        root = super().to_xml(model_options or {})
        root.set("generationTool", f"cosim {self._cfg.get('cosim_version')} (cosim fmu build)")
        host = self._cfg.get("host")
        if host:  # the host contract (documentation/index.html says the same), before ModelVariables
            vendor = Element("VendorAnnotations")
            tool = SubElement(vendor, "Tool", {"name": "cosim"})
            req = SubElement(tool, "HostRequirements", {
                "python": host["python"], "builtWith": host["built_with"],
                "backend": host.get("backend", "auto"),
                "libpythonEnvironmentVariable": host.get("libpython_env", "")})
            for p in host.get("packages", ()):
                SubElement(req, "Package", {"module": p["module"], "pip": p["pip"],
                                            "required": "true" if p["required"] else "false",
                                            "for": p["for"]})
            position = next(i for i, c in enumerate(root) if c.tag == "ModelVariables")
            root.insert(position, vendor)
        # UnitDefinitions right after <CoSimulation> (FMI 2.0 schema order)
        units = sorted({v.unit for v in self.vars.values() if getattr(v, "unit", None)})
        if units:
            node = Element("UnitDefinitions")
            for unit in units:
                SubElement(node, "Unit", {"name": unit})
            children = list(root)
            cs = next(i for i, c in enumerate(children) if c.tag == "CoSimulation")
            root.insert(cs + 1, node)
        # ModelStructure (§2.2.8): each output lists the inputs it depends on directly
        # (dependencies="" = none); initial outputs may also depend on the parameters
        index = {v.name: i for i, v in enumerate(self.vars.values(), start=1)}
        depends = {v["name"]: v.get("depends_on", ()) for v in self._output_vars}
        parameters = [str(i) for i, v in enumerate(self.vars.values(), start=1)
                      if v.causality == Fmi2Causality.parameter]
        structure = root.find("ModelStructure")
        for child in list(structure):
            structure.remove(child)
        outputs = [v for v in self.vars.values() if v.causality == Fmi2Causality.output]
        if outputs:
            out_node = SubElement(structure, "Outputs")
            init_node = SubElement(structure, "InitialUnknowns")
            for v in outputs:
                inputs = [str(index[n]) for n in depends.get(v.name, ())]
                SubElement(out_node, "Unknown", {"index": str(index[v.name]),
                                                 "dependencies": " ".join(inputs)})
                known = inputs + (parameters if v.name in depends else [])
                SubElement(init_node, "Unknown", {"index": str(index[v.name]),
                                                  "dependencies": " ".join(known)})
        return root
