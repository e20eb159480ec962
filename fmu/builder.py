"""Build an FMI 2.0 Co-Simulation FMU from a cosim model or scenario.

``build_fmu("pendulum", "Pendulum.fmu", params={"l": 2.0})`` validates the
whole configuration by constructing the :class:`cosim.Simulation` once (an
unknown model, method or parameter fails here with a :mod:`cosim.errors`
exception), derives the FMI variables from it, and zips:

``modelDescription.xml``
    written by :class:`fmu.slave.CosimSlave` (pythonfmu's description types),
    with the input -> output dependencies found by :func:`feedthrough`.
``resources/``
    ``cosim_fmu.json`` (simulation and variable configuration, GUID, name of
    the private package) and ``cosim_fmu_<hex>/``: the private package of this
    build (the ``cosim`` core, the slave runtime, the parts of pythonfmu the
    slave uses, any user model package; see :mod:`fmu.bundle`).
    ``cosim_python.cfg``: the Python runtime of the building interpreter (its
    libpython, home and site-packages), which the binary loads in a host that has
    no Python (:func:`python_runtime`; ``$COSIM_FMU_LIBPYTHON`` overrides it).
``binaries/linux64/<Identifier>.so``
    the FMI entry points (:mod:`fmu.native`, compiled once and cached).
``documentation/index.html``
    what the FMU is and what the importing host needs (:func:`host_contract`,
    also in ``modelDescription.xml`` under ``VendorAnnotations/Tool[@name="cosim"]``).

Variable names are the model's input/output/parameter names (block signals
``block.signal``), kept 1:1 when they are valid FMI structured names and
otherwise sanitized (the description records the original name); a name
``a.b`` whose ``a`` is also a variable becomes ``a_b`` (:func:`structured_names`:
a URDF robot's parameter ``panda_joint1.q0`` is ``panda_joint1_q0``, beside its
input ``panda_joint1``).
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import re
import sys
import tempfile
import uuid
from pathlib import Path

import cosim
from cosim.errors import CosimError, InvalidInputError

from .slave import CONFIG_FILE, CONFIG_FORMAT

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SEGMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SUBSCRIPT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[0-9]+(?:,[0-9]+)*\])$")  # "K[1,2]" (§2.2.9)
EVENT_COUNTER = "event_count"
SOLVER_PREFIX = "solver."


# the host contract: the Python range of the bundled code (pyproject requires-python)
# and the minimum versions of the packages it imports (pyproject dependencies / extras)
PYTHON_REQUIRES = (3, 11)
PACKAGES = {  # import name: (pip requirement, minimum version, what for)
    "numpy": ("numpy", "1.26", "arrays (every cosim FMU)"),
    "scipy": ("scipy", "1.11", "linear algebra and root finding (every cosim FMU)"),
    "numba": ("numba", "0.60", "the compiled backend (without it the python backend runs, "
                               "much slower per step)"),
    "pinocchio": ("pin", "3.0", "the robot model built from the URDF"),
}
LIBPYTHON_ENV = "COSIM_FMU_LIBPYTHON"
PYTHON_CONFIG_FILE = "cosim_python.cfg"


class FmuBuildError(CosimError):
    """Packing the FMU failed (pythonfmu reported a problem)."""


def fmi_name(name):
    """``name`` as a valid FMI 2.0 structured variable name (segments separated by '.')."""
    segments = []
    for seg in str(name).split("."):
        if _SUBSCRIPT.match(seg):  # an array element, e.g. a block's gain "K[1,2]"
            segments.append(seg)
            continue
        clean = re.sub(r"[^A-Za-z0-9_]", "_", seg) or "_"
        if not _SEGMENT.match(clean):
            clean = "_" + clean
        segments.append(clean)
    return ".".join(segments)


def _is_scenario(target):
    """A scenario file, or the bare name of a shipped one (``cosim scenarios``)
    that is not also a library model (``bouncing_ball`` is the model; its
    scenario is ``bouncing_ball.yaml``)."""
    from cosim.models import MODEL_REGISTRY
    from cosim.shipped import shipped_scenario
    if str(target).lower().endswith((".yaml", ".yml", ".json")):
        return True
    return str(target) not in MODEL_REGISTRY and shipped_scenario(target) is not None


def _load_scenario(path, method, rtol, atol, step, backend=None):
    """A scenario file as JSON-able data with the command-line overrides applied,
    the Simulation it builds, and its DefaultExperiment / input start values."""
    from cosim.scenario import Scenario

    scen = Scenario.load(path)
    data = _plain_json(scen.data)
    if method is None and scen.data.get("method") in (None, "auto"):
        # an FMU is driven (new inputs at every step): the default rule's driven choice
        from cosim.method_choice import default_method
        method = default_method(scen.spec.model_reference(),
                                fixed_step=step if step is not None else data.get("h"),
                                driven=True, params=data.get("params"))
    data["method"] = str(method) if method is not None else scen.method
    for key, value in (("rtol", rtol), ("atol", atol), ("h", step), ("backend", backend)):
        if value is not None:
            data[key] = value
    scen = Scenario(data, source=str(path))
    sim = scen.build()  # the scenario's own construction (e.g. exact sine generators)
    experiment = {"start_time": scen.start_time, "stop_time": scen.stop_time,
                  "step_size": float(scen.communication_step)}
    starts = {name: float(sig.value_at(scen.start_time)) for name, sig in scen.signals.items()
              if name in sim.input_names}
    refs = {"model": scen.model if isinstance(scen.model, str) else None, "blocks": scen.blocks}
    return data, sim, experiment, scen.name, scen.description, starts, refs


def _model_spec(target, position_limits=None):
    """The model as the FMU configuration stores it: a name or ``module:Class`` spec,
    or for a URDF file (named by the user who builds) the robot's text, bundled in
    the FMU's resources (``{"urdf_text": ...}``, :mod:`cosim.models.urdf`), with its
    stops on unless ``position_limits`` is False."""
    from cosim.models import is_urdf_spec

    if isinstance(target, str) and is_urdf_spec(target):
        from cosim.models.urdf import load_urdf
        return load_urdf(target, position_limits=position_limits is not False).spec()
    if position_limits is not None:
        raise InvalidInputError(f"--[no-]position-limits applies to a robot from URDF "
                                f"(ROBOT.urdf), not to {target!r}")
    return str(target)


def _user_modules(spec):
    """Top-level importable names of user code referenced by ``module:attr`` specs."""
    specs = []
    model = spec.get("model")
    if isinstance(model, str) and ":" in model:
        specs.append(model)
    for block in spec.get("blocks") or ():
        fn = block.get("function") if isinstance(block, dict) else None
        if isinstance(fn, str) and ":" in fn:
            specs.append(fn)
    tops = []
    for item in specs:
        top = item.partition(":")[0].split(".")[0]
        if top and top not in ("cosim", "fmu") and top not in tops:
            tops.append(top)
    return tops


def _signal_meta(signals):
    return {s.name: s for s in signals}


def structured_names(cosim_names):
    """{cosim name: FMI name} valid under FMI 2.0's structured naming (§2.2.9): each name
    as :func:`fmi_name` makes it, except that a name ``a.b`` whose prefix ``a`` is itself a
    variable (a URDF robot's input ``panda_joint1`` and its parameter ``panda_joint1.q0``)
    becomes ``a_b``, since ``a`` cannot be a scalar and a record at once."""
    names = {key: fmi_name(key) for key in cosim_names}
    scalars = set(names.values())
    for key, name in names.items():
        parts = name.split(".")
        if any(".".join(parts[:i]) in scalars for i in range(1, len(parts))):
            names[key] = "_".join(parts)
    return names


def describe_variables(sim, numeric_options):
    """FMI variable lists (JSON-able) for a constructed :class:`cosim.Simulation`."""
    model = sim.model
    inputs_meta, outputs_meta = _signal_meta(model.inputs), _signal_meta(model.outputs)
    used = {}
    block_params = sim.block_parameters()
    safe = structured_names(list(sim.input_names) + list(sim.output_names)
                            + [p.name for p in model.parameters] + [p["name"] for p in block_params])

    def claim(cosim_name, role):
        name = safe.get(cosim_name) or fmi_name(cosim_name)
        if name in used:
            raise InvalidInputError(
                f"FMI variable name {name!r} for {role} {cosim_name!r} collides with "
                f"{used[name]!r}; rename one of them")
        used[name] = f"{role} {cosim_name!r}"
        return name

    def describe(text, cosim_name, name):
        text = text or ""
        if name != cosim_name:
            text = f"{text} (cosim name {cosim_name!r})".strip()
        return text

    def unit_of(meta):
        unit = getattr(meta, "unit", "") or ""
        return None if unit in ("", "1", "-") else unit

    start_inputs = sim.get_inputs().tolist()
    inputs = []
    for i, key in enumerate(sim.input_names):
        meta = inputs_meta.get(key)
        name = claim(key, "input")
        text = meta.description if meta else f"input {key.partition('.')[2]!r} of block {key.partition('.')[0]!r}"
        inputs.append({"name": name, "key": key, "unit": unit_of(meta), "start": float(start_inputs[i]),
                       "description": describe(text, key, name)})
    outputs = []
    for key in sim.output_names:
        meta = outputs_meta.get(key)
        name = claim(key, "output")
        text = meta.description if meta else f"output {key.partition('.')[2]!r} of block {key.partition('.')[0]!r}"
        outputs.append({"name": name, "key": key, "unit": unit_of(meta),
                        "description": describe(text, key, name),
                        "discrete": meta is None})  # block outputs are piecewise constant
    parameters = []
    for p in model.parameters:
        name = claim(p.name, "parameter")
        parameters.append({"name": name, "key": p.name, "unit": unit_of(p),
                           "start": float(model.params[p.name]), "tunable": bool(p.tunable),
                           "description": describe(p.description, p.name, name)})
    for p in block_params:  # tunable; a new value takes effect at the block's next sample instant
        name = claim(p["name"], "block parameter")
        parameters.append({"name": name, "key": p["name"], "unit": p["unit"], "start": p["value"],
                           "tunable": True, "block": True,
                           "description": describe(p["description"] + "; tunable: a new value "
                                                   "takes effect at the block's next sample instant",
                                                   p["name"], name)})
    solver = [
        {"name": claim(SOLVER_PREFIX + "method", "solver setting"), "key": "method", "type": "String",
         "start": sim.method, "description": "integration method (cosim METHOD_REGISTRY name)"},
        {"name": claim(SOLVER_PREFIX + "rtol", "solver setting"), "key": "rtol", "start": float(sim.rtol),
         "description": "relative tolerance (adaptive step)"},
        {"name": claim(SOLVER_PREFIX + "atol", "solver setting"), "key": "atol", "start": float(sim.atol),
         "description": "absolute tolerance (adaptive step)"},
        {"name": claim(SOLVER_PREFIX + "step", "solver setting"), "key": "step", "unit": "s",
         "start": float(sim.h or 0.0), "description": "fixed integration step; 0 = adaptive"},
    ]
    for key, value in numeric_options.items():
        solver.append({"name": claim(SOLVER_PREFIX + key, "method option"), "key": key,
                       "start": float(value), "option": True,
                       "description": f"method option {key!r} of {sim.method!r}"})
    counter = EVENT_COUNTER if EVENT_COUNTER not in used else "cosim_" + EVENT_COUNTER
    claim(counter, "event counter")
    return {"inputs": inputs, "outputs": outputs, "parameters": parameters, "solver": solver,
            "event_counter": counter}


def feedthrough(sim):
    """{output key: [input keys]}: the external inputs each output depends on directly
    (FMI 2.0.4 §2.2.8 ModelStructure ``dependencies``).

    Found from the model: ``model.output_values(t, y, u)`` at the initial state is
    evaluated with each external plant input perturbed alone, from two base input
    vectors (zero and a fixed pseudo-random one), so that a dependence hidden by a
    zero coefficient at one point is seen at the other.  Block outputs and plant
    inputs driven by blocks are held between sample instants: no feedthrough."""
    import numpy as np

    model = sim.model
    external = set(sim.input_names)
    deps = {key: [] for key in sim.output_names}
    t, y = sim.time, np.array(sim.y, dtype=float)
    rng = np.random.default_rng(12345)
    bases = [np.zeros(model.n_inputs), rng.uniform(-1.0, 1.0, model.n_inputs)]

    def out(u):
        try:
            return np.asarray(model.output_values(t, y, u), dtype=float).reshape(-1)
        except Exception:  # noqa: BLE001 - cannot tell: declare a dependence (conservative)
            return None

    for j, name in enumerate(model.input_names):
        if name not in external:
            continue
        for base in bases:
            for delta in (1.0, -0.37):
                u = base.copy()
                u[j] += delta
                a, b = out(base), out(u)
                for k, key in enumerate(model.output_names):
                    changed = (a is None or b is None
                               or not (a[k] == b[k] or (np.isnan(a[k]) and np.isnan(b[k]))))
                    if changed and name not in deps[key]:
                        deps[key].append(name)
    return {key: sorted(v, key=sim.input_names.index) for key, v in deps.items()}


def _plain_json(value):
    """JSON-able copy (tuples -> lists, numpy scalars -> Python)."""
    if isinstance(value, dict):
        return {str(k): _plain_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_json(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _loaded_libpython():
    """The libpython shared library this process runs on (None: a static python)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                path = line.split(maxsplit=5)[-1].strip()
                if re.search(r"/libpython3\.\d+[a-z]*\.so", path) and os.path.isfile(path):
                    return path
    except OSError:
        pass
    return None


def python_runtime(modules=("numpy", "scipy", "numba", "pinocchio")):
    """The building interpreter as the FMU binary records it (``resources/cosim_python.cfg``):
    its version, its shared libpython (the one this process runs on, else sysconfig's), its
    home (``sys.base_prefix``) and the site-packages folders holding ``modules`` and this
    environment's packages.  A host without Python gets this interpreter, unless
    ``$COSIM_FMU_LIBPYTHON`` names another libpython."""
    import sysconfig

    libdir = sysconfig.get_config_var("LIBDIR") or ""
    soname = sysconfig.get_config_var("INSTSONAME") or sysconfig.get_config_var("LDLIBRARY") or ""
    libpython = _loaded_libpython()
    if libpython is None and soname.endswith(tuple(f".so{x}" for x in ("", ".1", ".1.0"))):
        candidate = os.path.join(libdir, soname)
        libpython = candidate if os.path.isfile(candidate) else None
    paths = []
    for key in ("purelib", "platlib"):
        paths.append(sysconfig.get_paths()[key])
    for name in modules:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin not in (None, "built-in", "frozen"):
            folder = Path(spec.origin).parent
            paths.append(str(folder.parent if spec.submodule_search_locations else folder))
    paths = [p for p in dict.fromkeys(os.path.realpath(p) for p in paths) if os.path.isdir(p)]
    return {"version": f"{sys.version_info[0]}.{sys.version_info[1]}",
            "full_version": sys.version.split()[0],
            "requires": ">=" + ".".join(map(str, PYTHON_REQUIRES)),
            "libpython": os.path.realpath(libpython) if libpython else "",
            "soname": os.path.basename(soname) if soname else "",
            "home": sys.base_prefix, "paths": paths}


def host_contract(sim, backend, runtime):
    """What the importing host needs (JSON-able): the Python range and the packages,
    each with its pip requirement, minimum version, purpose and whether instantiation
    requires it.  numba: required with backend "numba", optional with "auto" (the
    python backend runs without it, said in the FMI log), absent with "python";
    pinocchio for URDF robots."""
    from cosim.models.urdf import URDFModel

    needed = [("numpy", True), ("scipy", True)]
    if backend == "numba":
        needed.append(("numba", True))
    elif backend == "auto":
        needed.append(("numba", False))
    if isinstance(sim.model, URDFModel):
        needed.append(("pinocchio", True))
    packages = []
    for module, required in needed:
        pip, minimum, purpose = PACKAGES[module]
        packages.append({"module": module, "pip": f"{pip}>={minimum}", "min": minimum,
                         "required": required, "for": purpose})
    return {"python": runtime["requires"], "python_min": list(PYTHON_REQUIRES),
            "built_with": runtime["full_version"], "backend": backend, "packages": packages,
            "libpython_env": LIBPYTHON_ENV}


def _runtime_config(runtime):
    """``resources/cosim_python.cfg``: key=value lines read by the binary (python_loader.h)."""
    lines = ["# the Python runtime a host without Python loads for this FMU (cosim fmu build);",
             f"# ${LIBPYTHON_ENV} overrides libpython, $PYTHONHOME home, $PYTHONPATH adds folders"]
    for key in ("version", "requires", "libpython", "soname", "home"):
        lines.append(f"{key}={runtime[key]}")
    lines.extend(f"path={p}" for p in runtime["paths"])
    for line in lines:
        if "\n" in line or "\r" in line:
            raise FmuBuildError(f"cannot record the Python runtime: a path contains a newline: {line!r}")
    return "\n".join(lines) + "\n"


def build_fmu(target, output=None, *, method=None, rtol=None, atol=None, step=None, params=None,
              method_options=None, name=None, stop_time=None, step_size=None, blocks=None,
              connections=None, backend=None, position_limits=None):
    """Build ``output`` (an .fmu path; default ``<Identifier>.fmu``) and return its Path.

    ``target``: a library model name, ``package.module:ClassName`` of a user
    model, a URDF file ``robot.urdf`` (its text goes into the FMU), or a scenario file (``.yaml``: plant + discrete blocks as one FMU;
    its method/tolerances/step are used unless given here, its input signals
    give the start values of the FMU inputs, its stop time and communication
    step the DefaultExperiment).
    ``method`` (default: the scenario's, else cosim.method_choice's rule for a driven
    plant: dopri5 for multibody (with ``step``: rk4 where it is stable at that step,
    else generalized-alpha), state-transition for LTI, dopri5 for other ODEs), ``rtol``/``atol`` (1e-6/1e-8),
    ``step``: fixed integration step (None: adaptive).
    ``stop_time``/``step_size``: the DefaultExperiment (defaults: the model's
    usual horizon and 1/500 of it, or the blocks' base step).
    ``blocks``/``connections``: discrete blocks for a model FMU, as
    :class:`cosim.Simulation` takes them (dicts, see :func:`cosim.blocks.make_block`).
    ``backend``: "auto" (default: compiled where numba is importable in the host),
    "numba" (the host must have numba) or "python" (never compiles).
    ``position_limits``: a robot's joint position limits as stops that hold (None,
    the default: on; False: the joints move past them).
    """
    from cosim.run import default_stop_time
    from cosim.simulation import Simulation
    from cosim.spec import SimulationSpec
    from cosim.validation import finite_float

    from cosim.jit import check_backend

    params = dict(params or {})
    method_options = dict(method_options or {})
    if backend is not None:
        backend = check_backend(backend)
    if step is not None:
        step = finite_float("--step", step, positive=True)
    for key, value in (("rtol", rtol), ("atol", atol)):
        if value is not None:
            finite_float(key, value, positive=True)
    if _is_scenario(target):
        if params or method_options or blocks or connections or position_limits is not None:
            raise InvalidInputError("--param/--option/--block/--connect/--[no-]position-limits "
                                    "apply to model FMUs; set them in the scenario file")
        data, sim, experiment, default_name, description, input_starts, refs = \
            _load_scenario(target, method, rtol, atol, step, backend)
        sim.set_inputs(input_starts)
        spec = {"scenario": data}
        method_options = dict(data.get("method_options") or {})
    else:
        spec = {"model": _model_spec(target, position_limits)}
        if blocks:
            spec["blocks"] = [dict(b) for b in blocks]
        if connections:
            spec["connections"] = list(connections)
        if backend is not None:
            spec["backend"] = backend
        refs, experiment, default_name, description = spec, {}, None, ""
        # validate everything by building the simulation once, through the spec the FMU's
        # slave will translate its configuration into (clear cosim errors)
        if method is None or method == "auto":   # driven by the host: cosim.method_choice
            from cosim.method_choice import default_method
            method = default_method(spec["model"], fixed_step=step, driven=True, params=params)
        sim = Simulation.from_spec(SimulationSpec.from_dict(
            dict(spec, method=method, params=params, rtol=rtol, atol=atol, h=step,
                 method_options=method_options, communication_step=None), source="cosim fmu build"))
        spec = dict(spec, params=params)
    rtol = float(sim.rtol)

    identifier = name or default_name or type(sim.model).__name__
    identifier = re.sub(r"[^A-Za-z0-9_]", "_", str(identifier)) if not name else str(name)
    if not _IDENTIFIER.match(identifier):
        raise InvalidInputError(f"FMU identifier must be a C identifier ([A-Za-z_][A-Za-z0-9_]*), "
                                f"got {identifier!r}")
    numeric_options = {k: v for k, v in method_options.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool)}
    other_options = {k: v for k, v in method_options.items() if k not in numeric_options}
    variables = describe_variables(sim, numeric_options)
    direct = feedthrough(sim)
    names = {v["key"]: v["name"] for v in variables["inputs"]}
    for v in variables["outputs"]:
        v["depends_on"] = [names[key] for key in direct.get(v["key"], ())]

    t_start = float(experiment.get("start_time", 0.0))
    t_end = stop_time if stop_time is not None else experiment.get("stop_time")
    if t_end is None:
        t_end = t_start + default_stop_time(sim.model)[0]  # the model's default_t_end, else as the CLI
    t_end = finite_float("--stop-time", t_end)
    if not t_end > t_start:
        raise InvalidInputError(f"--stop-time {t_end!r} must be after the start time {t_start!r}")
    dt = step_size if step_size is not None else experiment.get("step_size")
    if dt is None:
        dt = sim.base_step or (t_end - t_start) / 500.0
    dt = finite_float("--comm-step", dt, positive=True)
    # the DefaultExperiment's tolerance within reach of the method by its stopTime (refused
    # here, or one warning); the FMU checks again when an importer chooses others
    from cosim import step_budget
    step_budget.check(sim, t_end, min(dt, t_end - sim.time), math.ceil((t_end - sim.time) / dt),
                      driven=True)
    if not description:
        description = getattr(sim.model, "description", "") or sim.model.name
        if sim.blocks:
            description += " + blocks " + ", ".join(b.name for b in sim.blocks)
    runtime = python_runtime()
    config = {
        "format": CONFIG_FORMAT, "version": 1, "identifier": identifier,
        "host": host_contract(sim, sim.requested_backend, runtime),
        "description": description, "cosim_version": cosim.__version__,
        "simulation": _plain_json(dict(spec, method_options=other_options)
                                  if "scenario" not in spec else spec),
        "variables": variables,
        "default_experiment": {"start_time": t_start, "stop_time": t_end, "step_size": dt,
                               "tolerance": rtol},
    }
    output = Path(output) if output is not None else Path(f"{identifier}.fmu")
    if output.suffix != ".fmu":
        raise InvalidInputError(f"output file must end in .fmu, got {str(output)!r}")
    output = output.resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    return _pack(identifier, config, _user_modules(refs), output, runtime)


def _user_module_path(top):
    spec = importlib.util.find_spec(top)
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        raise InvalidInputError(f"cannot bundle user module {top!r}: it is not importable from source")
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return Path(spec.origin)


def _pack(identifier, config, user_modules, output, runtime):
    """Zip modelDescription.xml, the private code package and the binary (FMI 2.0.4 §2.3)."""
    import zipfile
    from xml.dom import minidom
    from xml.etree.ElementTree import tostring

    import pythonfmu

    from .bundle import package_name, stage_package
    from .native import PLATFORM, native_library
    from .slave import CosimSlave

    guid = str(uuid.uuid4())
    config = dict(config, guid=guid, package=package_name(guid),
                  user_modules=list(user_modules))  # the only code the configuration may name
    library = native_library()
    with tempfile.TemporaryDirectory(prefix="cosim_fmu_") as tmp:
        resources = Path(tmp) / "resources"
        resources.mkdir()
        (resources / CONFIG_FILE).write_text(json.dumps(config, indent=1))
        (resources / PYTHON_CONFIG_FILE).write_text(_runtime_config(runtime), encoding="utf-8")
        stage_package(resources, config["package"], cosim_dir=Path(cosim.__file__).resolve().parent,
                      fmu_dir=Path(__file__).resolve().parent,
                      pythonfmu_dir=Path(pythonfmu.__file__).resolve().parent,
                      user_paths=[_user_module_path(top) for top in user_modules],
                      identifier=identifier, description=config["description"])
        try:  # the host's copy of the slave describes itself (same code as the bundle)
            slave = CosimSlave(instance_name="build", resources=str(resources))
            xml = slave.to_xml({"canHandleVariableCommunicationStepSize": True,
                                "canInterpolateInputs": False, "canGetAndSetFMUstate": True,
                                "canSerializeFMUstate": True, "needsExecutionTool": True,
                                "canBeInstantiatedOnlyOncePerProcess": False})
        except CosimError:
            raise
        except Exception as exc:
            raise FmuBuildError(f"could not describe FMU {identifier}: {exc!r}") from exc
        text = minidom.parseString(tostring(xml, "utf-8")).toprettyxml(encoding="UTF-8")
        partial = output.with_name(output.name + ".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("modelDescription.xml", text)
            zf.writestr("documentation/index.html", documentation(config, runtime))
            zf.write(library, f"binaries/{PLATFORM}/{identifier}.so")
            for path in sorted(resources.rglob("*")):
                if path.is_file():
                    zf.write(path, "resources/" + path.relative_to(resources).as_posix())
        partial.replace(output)
    return output


def documentation(config, runtime):
    """``documentation/index.html`` of the FMU (FMI 2.0.4 §2.3): what it is and what the
    importing host needs."""
    from html import escape

    host = config["host"]
    required = [p for p in host["packages"] if p["required"]]
    optional = [p for p in host["packages"] if not p["required"]]
    pip = " ".join(f"'{p['pip']}'" for p in required)

    def rows(packages):
        return "\n".join(f"<tr><td><code>{escape(p['module'])}</code></td><td><code>"
                         f"{escape(p['pip'])}</code></td><td>{escape(p['for'])}</td></tr>"
                         for p in packages)

    table = "<tr><th>module</th><th>pip</th><th>for</th></tr>"
    parts = [
        "<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\">",
        f"<title>{escape(config['identifier'])}</title></head><body>",
        f"<h1>{escape(config['identifier'])}</h1>",
        f"<p>{escape(config['description'])}</p>",
        f"<p>An FMI 2.0 Co-Simulation FMU (linux64) built by cosim {escape(config['cosim_version'])}"
        " (<code>cosim fmu build</code>). It runs the cosim core it carries in "
        "<code>resources/</code> on a Python interpreter.</p>",
        "<h2>What the importing host needs</h2>",
        f"<p>64-bit Linux with glibc 2.28 or newer, and CPython <code>{escape(host['python'])}</code> "
        f"(built with {escape(host['built_with'])}) with these packages importable:</p>",
        f"<table>{table}\n{rows(required)}</table>",
        f"<p>Install them with <code>python -m pip install {escape(pip)}</code> in that Python.</p>",
    ]
    if optional:
        parts += ["<p>Optional:</p>", f"<table>{table}\n{rows(optional)}</table>"]
    parts += [
        "<p><code>fmi2Instantiate</code> checks all of this and, when something is missing, "
        "returns NULL after one log message (status fmi2Error) naming it and how to install it.</p>",
        "<h2>Which Python</h2>",
        "<p>A Python host (FMPy, libcosimpy, ...) runs the FMU in its own interpreter. "
        "A host without Python (a C/C++ simulator) gets the interpreter the FMU was built with, "
        "recorded in <code>resources/cosim_python.cfg</code>:</p><ul>",
        f"<li>libpython: <code>{escape(runtime['libpython'] or '(none: a static python built it)')}"
        "</code>, else <code>" + escape(runtime["soname"] or "libpython" + runtime["version"] + ".so")
        + "</code> on the library search path;</li>",
        f"<li>home: <code>{escape(runtime['home'])}</code>;</li>",
        "<li>site-packages: " + ", ".join(f"<code>{escape(p)}</code>" for p in runtime["paths"])
        + ".</li></ul>",
        "<p>Environment variables of the host process override them: "
        f"<code>{LIBPYTHON_ENV}</code> (path of the libpython shared library to load), "
        "<code>PYTHONHOME</code> (its installation) and <code>PYTHONPATH</code> (more module "
        "folders).</p>",
        "<h2>Log</h2>",
        "<p>Messages go to the importer's logger callback: errors and discards always; warnings "
        "always (the python backend running instead of the compiled one, and why; an importer's "
        "tolerance replacing the FMU's own; an initial state the initial-condition analysis "
        "repaired); information (which Python and backend run) with debug logging on.</p>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"
