"""SimulationSpec: the one declarative description of a run (DESIGN.md "Layout").

A spec is plain data -- frozen, hashable, picklable, JSON/YAML round-trippable --
so a run can be shipped to another process (``cosim.sweep`` on Dask), cached or
written next to its results.  Its vocabulary is the scenario file's
(``scenarios/*.yaml``), plus ``record``, ``metrics`` and ``backend``::

    model: pendulum            # library name | package.module:Class | {urdf: path}
                               # (path/file.py:Class only from the command line)
    params: {l: 1.0}
    method: generalized-alpha  # default by model kind (multibody / LTI / other ODE)
    rtol: 1.0e-6               # atol, h, method_options (typed by the method's defaults)
    start_time: 0.0
    stop_time: 4.0             # default: start + the model's default_t_end (cosim simulate's rule)
    communication_step: 0.01   # the integrator lands on every multiple (inputs change
                               # there); null: only on input breakpoints and stop_time
    blocks: [...]              # cosim.blocks; connections: ["a -> b", ...]
    inputs: {fx: {type: step, time: 1.0, after: 0.5}}    # cosim.signals
    record: {interval: 0.01, signals: [angle, pd.u]}      # dense output at the interval
    metrics:                   # per run: final, max, min, rms, settling_time, events
      - {signal: angle, kind: settling_time, band: 0.02}

Every value is checked here, once; an unknown key or a bad value raises
:class:`~cosim.errors.SpecError` naming the key and the value.  Files are read with
``yaml.safe_load`` (no code, no tags) and are bounded in size and node count.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .errors import CosimError, InvalidInputError, SpecError
from .multirate import exact_time
from .validation import finite_float, flag

from .safe_yaml import MAX_BYTES as MAX_SPEC_BYTES     # a spec / scenario file: at most 1 MiB
from .safe_yaml import MAX_DEPTH as MAX_SPEC_DEPTH     # nesting levels
from .safe_yaml import MAX_NODES as MAX_SPEC_NODES     # values after YAML aliases are expanded
DEFAULT_COMMUNICATION_STEP = 0.01   # the scenario files' documented default
BACKENDS = ("auto", "numba", "python")
METRIC_KINDS = ("final", "max", "min", "rms", "settling_time", "events")
CHATTERING = ("error", "stop")


class FrozenMap(Mapping):
    """A read-only, hashable mapping (spec parameters, options, blocks)."""

    __slots__ = ("_d",)

    def __init__(self, items=()):
        object.__setattr__(self, "_d", dict(items))

    def __getitem__(self, key):
        return self._d[key]

    def __iter__(self):
        return iter(self._d)

    def __len__(self):
        return len(self._d)

    def __hash__(self):
        return hash(tuple(sorted(self._d.items(), key=lambda kv: kv[0])))

    def __repr__(self):
        return f"FrozenMap({self._d!r})"

    def __reduce__(self):
        return (FrozenMap, (self._d,))


def freeze(value, where="spec", _count=None, _depth=1):
    """Plain data -> immutable (dict -> FrozenMap, list -> tuple), bounded in size and depth."""
    count = _count if _count is not None else [0]
    count[0] += 1
    if count[0] > MAX_SPEC_NODES:
        raise SpecError(f"{where}: more than {MAX_SPEC_NODES} values (YAML aliases expand "
                        f"to copies); refusing to read it")
    if _depth > MAX_SPEC_DEPTH:
        raise SpecError(f"{where}: nested more than {MAX_SPEC_DEPTH} levels deep (or a "
                        f"recursive reference); refusing to read it")
    if isinstance(value, Mapping):
        return FrozenMap((str(k), freeze(v, where, count, _depth + 1)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v, where, count, _depth + 1) for v in value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return freeze(value.tolist(), where, count, _depth)
    raise SpecError(f"{where}: {type(value).__name__} {value!r:.60} is not plain data "
                    f"(numbers, strings, lists, mappings)")


def thaw(value):
    """Immutable -> plain JSON-able data (FrozenMap -> dict, tuple -> list)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


# -- typed checks (one place) -------------------------------------------------------------
def _nonnegative(key, value):
    x = _number(key, value)
    if x is not None and x < 0.0:
        raise SpecError(f"{key} must be >= 0, got {x!r}")
    return x


def _number(key, value, *, positive=False, optional=True):
    if value is None and optional:
        return None
    if isinstance(value, bool):
        raise SpecError(f"{key} must be a number, got {value!r}")
    try:
        return finite_float(key, value, positive=positive)
    except InvalidInputError as exc:
        raise SpecError(str(exc)) from None


def _text(key, value, optional=True):
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{key} must be a non-empty string, got {value!r:.80}")
    return value.strip()


def _mapping(key, value):
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(f"{key} must be a mapping, got {type(value).__name__} {value!r:.80}")
    return value


def _list(key, value):
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise SpecError(f"{key} must be a list, got {type(value).__name__} {value!r:.80}")
    return list(value)


def typed_method_options(method, options):
    """Method options checked against the method's declared defaults: unknown names are
    errors; a value for a boolean option may be a word (true/false/on/off/yes/no) and
    becomes a bool; a value for an integer option must be integral and becomes an int.
    Other values go to the method's own ``check_options``."""
    from .integrators import method_class
    from .validation import step_count
    cls = method_class(method)
    declared = dict(cls.options)
    common = {"max_steps": 1, "max_step": 1.0, "first_step": 1.0}
    out = {}
    for name, value in options.items():
        if name not in declared and name not in common:
            known = ", ".join(sorted([*declared, *common]))
            raise SpecError(f"method_options: method {method!r} has no option {name!r} "
                            f"(options: {known})")
        default = declared.get(name, common.get(name))
        where = f"method_options.{name}"
        if isinstance(default, bool) or name in cls.flag_words:
            try:  # the integrators' one parser of boolean options (and their extra words)
                value = flag(where, value, cls.flag_words.get(name, ()))
            except InvalidInputError as exc:
                raise SpecError(str(exc)) from None
        elif isinstance(default, int) and not isinstance(value, str):
            if isinstance(value, bool) or not float(value).is_integer():
                raise SpecError(f"{where} must be an integer, got {value!r:.80}")
            value = int(value)
            if name == "max_steps":
                step_count(where, value)
        elif isinstance(default, float) and name in common:
            value = _number(where, value, positive=True, optional=False)
        out[name] = value
    return out


@dataclass(frozen=True)
class Metric:
    """One number per run computed from the recording (``cosim.run.metric_value``)."""
    kind: str
    signal: str | None = None
    name: str = ""
    band: float = 0.02            # settling_time: relative to |final - initial|
    tolerance: float | None = None  # settling_time: an absolute band instead

    @classmethod
    def from_dict(cls, d, index):
        where = f"metrics[{index}]"
        if isinstance(d, str):
            d = {"kind": "events"} if d == "events" else {"signal": d, "kind": "final"}
        d = dict(_mapping(where, d))
        unknown = sorted(set(d) - {"kind", "signal", "name", "band", "tolerance"})
        if unknown:
            raise SpecError(f"{where}: unknown key {unknown[0]!r} (allowed: band, kind, name, "
                            f"signal, tolerance)")
        kind = d.get("kind", "final")
        if kind not in METRIC_KINDS:
            raise SpecError(f"{where}.kind must be one of {', '.join(METRIC_KINDS)}, got {kind!r:.60}")
        signal = _text(f"{where}.signal", d.get("signal"))
        if signal is None and kind != "events":
            raise SpecError(f"{where}: kind {kind!r} needs a 'signal'")
        band = _number(f"{where}.band", d.get("band", 0.02), positive=True, optional=False)
        tol = _number(f"{where}.tolerance", d.get("tolerance"), positive=True)
        name = _text(f"{where}.name", d.get("name")) or (kind if signal is None else f"{kind}:{signal}")
        return cls(kind=kind, signal=signal, name=name, band=band, tolerance=tol)

    def to_dict(self):
        d = {"kind": self.kind, "name": self.name}
        if self.signal is not None:
            d["signal"] = self.signal
        if self.kind == "settling_time":
            d["band"] = self.band
            if self.tolerance is not None:
                d["tolerance"] = self.tolerance
        return d


@dataclass(frozen=True)
class SimulationSpec:
    """A frozen, validated description of one run; build it with :meth:`from_dict`,
    :meth:`from_yaml` or :meth:`load` (the constructor itself checks nothing)."""
    model: str
    params: FrozenMap = field(default_factory=FrozenMap)
    model_format: str = "name"        # "name" (library / module:Class / file.py:Class) | "urdf"
    urdf_options: FrozenMap = field(default_factory=FrozenMap)  # a robot: frames, position_limits
    name: str = ""
    description: str = ""
    method: str | None = None
    rtol: float | None = None
    atol: float | None = None
    h: float | None = None
    method_options: FrozenMap = field(default_factory=FrozenMap)
    backend: str = "auto"
    start_time: float = 0.0
    stop_time: float | None = None
    communication_step: float | None = DEFAULT_COMMUNICATION_STEP
    blocks: tuple = ()
    connections: tuple = ()
    inputs: FrozenMap = field(default_factory=FrozenMap)
    event_tolerance: float | None = None
    max_ic_repair: float | None = None      # a larger IC repair is an error (None: warn only)
    on_chattering: str | None = None
    max_chattering_events: int | None = None
    record_interval: float | None = None   # None: the communication step (else span/500)
    record_signals: tuple | None = None     # None: every state, output and input
    metrics: tuple = ()

    # -- reading ----------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data, source="spec"):
        """Validate plain data (the YAML/JSON vocabulary) into a spec."""
        if not isinstance(data, Mapping):
            raise SpecError(f"{source}: a spec must be a mapping, got {type(data).__name__}")
        data = thaw(freeze(data, source))  # bounded copy, plain types
        model = data.get("model")
        if isinstance(model, Mapping) and "urdf" in model:  # {urdf: PATH} next to the spec file
            from .scenario import urdf_plant
            data["model"] = dict(urdf_plant(model, source), **(
                {"params": model["params"]} if "params" in model else {}))
        unknown = sorted(set(data) - set(FILE_KEYS))
        if unknown:
            raise SpecError(f"{source}: unknown keys {unknown} (allowed: {', '.join(FILE_KEYS)})")
        try:
            return cls._parse(data)
        except CosimError as exc:  # e.g. an input signal's or a model's own message
            raise SpecError(f"{source}: {exc}") from None

    @classmethod
    def _parse(cls, d):
        model = d.get("model")
        params = dict(_mapping("params", d.get("params")))
        model_format = "name"
        urdf_options = {}
        if isinstance(model, Mapping):
            extra = sorted(set(model) - {"name", "urdf_text", "frames", "position_limits", "params"})
            if extra or ("name" in model) == ("urdf_text" in model):
                raise SpecError(f"model must be a name or a mapping with one of 'name' / 'urdf' "
                                f"(a path next to the spec file) / 'urdf_text' (and 'params'; a "
                                f"robot also 'frames', 'position_limits'), got {dict(model)!r:.120}")
            params.update(_mapping("model.params", model.get("params")))
            model_format = "urdf" if "urdf_text" in model else "name"
            if model_format == "urdf":
                urdf_options = {k: model[k] for k in ("frames", "position_limits") if k in model}
            model = model.get("urdf_text", model.get("name"))
        if model is None:
            raise SpecError("'model' is required")
        if model_format == "urdf":  # the text as given (its SHA-256 names the robot in states)
            if not isinstance(model, str) or not model.strip():
                raise SpecError(f"model.urdf_text must be the URDF text, got {model!r:.80}")
        else:
            model = _text("model", model, optional=False)
        method = _text("method", d.get("method"))
        if method == "auto":   # the default rule (cosim.method_choice), resolved below
            method = None
        if method is not None:
            from .integrators import method_class
            try:
                method_class(method)
            except CosimError as exc:
                raise SpecError(f"method: {exc}") from None
        start = _number("start_time", d.get("start_time", 0.0), optional=False)
        stop = _number("stop_time", d.get("stop_time"))
        if method is None or stop is None:  # resolved here: a spec is concrete
            plant = _plant_class(model, model_format, urdf_options)
            if method is None:
                from .scenario import default_method
                # fixed step h: rk4 where it is stable at h, else generalized-alpha
                # (the plant with the spec's params); driven: blocks or signals
                method = default_method(plant, "model", fixed_step=d.get("h"),
                                        driven=bool(d.get("blocks") or d.get("inputs")), params=params,
                                        backend=d.get("backend", "auto"))
            if stop is None:
                from .run import FALLBACK_T_END, default_stop_time
                stop = start + (default_stop_time(plant)[0] if plant is not None else FALLBACK_T_END)
        options = dict(_mapping("method_options", d.get("method_options")))
        if options:
            options = typed_method_options(method, options)
        backend = d.get("backend", "auto")
        if backend not in BACKENDS:
            raise SpecError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r:.60}")
        if not stop > start:
            raise SpecError(f"stop_time {stop!r} must be after start_time {start!r}")
        comm = d.get("communication_step", DEFAULT_COMMUNICATION_STEP)
        if comm is not None:
            try:
                exact_time(comm, "communication_step")
            except InvalidInputError as exc:
                raise SpecError(str(exc)) from None
            comm = _number("communication_step", comm, positive=True, optional=False)
        blocks = _list("blocks", d.get("blocks"))
        for i, b in enumerate(blocks):
            _mapping(f"blocks[{i}]", b)
        connections = _list("connections", d.get("connections"))
        inputs = _mapping("inputs", d.get("inputs"))
        from .signals import InputSignal
        for key, sig in inputs.items():
            InputSignal(str(key), sig)  # raises ScenarioError naming the input
        chatter = d.get("on_chattering")
        if chatter is not None and chatter not in CHATTERING:
            raise SpecError(f"on_chattering must be 'error' or 'stop', got {chatter!r:.60}")
        max_chatter = d.get("max_chattering_events")
        if max_chatter is not None and (isinstance(max_chatter, bool) or not isinstance(max_chatter, int)
                                        or max_chatter < 1):
            raise SpecError(f"max_chattering_events must be an integer >= 1, got {max_chatter!r:.60}")
        record = dict(_mapping("record", d.get("record")))
        bad = sorted(set(record) - {"interval", "signals"})
        if bad:
            raise SpecError(f"record: unknown key {bad[0]!r} (allowed: interval, signals)")
        interval = _number("record.interval", record.get("interval"), positive=True)
        signals = record.get("signals")
        if signals is not None:
            signals = tuple(_text(f"record.signals[{i}]", s, optional=False)
                            for i, s in enumerate(_list("record.signals", signals)))
        metrics = tuple(Metric.from_dict(m, i) for i, m in enumerate(_list("metrics", d.get("metrics"))))
        names = [m.name for m in metrics]
        if len(set(names)) != len(names):
            raise SpecError(f"metrics: names must be unique, got {names}")
        return cls(
            model=model, params=freeze(params), model_format=model_format,
            urdf_options=freeze(urdf_options),
            name=str(d.get("name") or ""), description=str(d.get("description") or "").strip(),
            method=method,
            rtol=_number("rtol", d.get("rtol"), positive=True),
            atol=_number("atol", d.get("atol"), positive=True),
            h=_number("h", d.get("h"), positive=True),
            method_options=freeze(options), backend=backend, start_time=start, stop_time=stop,
            communication_step=comm, blocks=freeze(blocks), connections=freeze(connections),
            inputs=freeze({str(k): v for k, v in inputs.items()}),
            event_tolerance=_number("event_tolerance", d.get("event_tolerance"), positive=True),
            max_ic_repair=_nonnegative("max_ic_repair", d.get("max_ic_repair")),
            on_chattering=chatter, max_chattering_events=max_chatter,
            record_interval=interval, record_signals=signals, metrics=metrics)

    @classmethod
    def from_yaml(cls, text, source="spec"):
        """A spec from YAML text (a file's content: it names no code, :mod:`cosim.code_refs`)."""
        from .code_refs import check_data
        data = parse_yaml(text, source)
        check_data(data, source)
        return cls.from_dict(data, source)

    @classmethod
    def load(cls, path):
        """A spec from a YAML or JSON file (JSON is YAML), or a shipped scenario by name."""
        data, path = read_file(path, "spec")
        spec = cls.from_dict(data, source=str(path))
        return spec if spec.name else spec.replace(name=Path(str(path)).stem)

    # -- writing ------------------------------------------------------------------------
    def to_dict(self):
        """Plain data in the file vocabulary; ``from_dict(to_dict())`` == self."""
        d = {"name": self.name, "description": self.description,
             "model": self._urdf_reference() if self.model_format == "urdf" else self.model,
             "params": thaw(self.params), "method": self.method, "rtol": self.rtol,
             "atol": self.atol, "h": self.h, "method_options": thaw(self.method_options),
             "backend": self.backend, "start_time": self.start_time, "stop_time": self.stop_time,
             "communication_step": self.communication_step, "blocks": thaw(self.blocks),
             "connections": thaw(self.connections), "inputs": thaw(self.inputs),
             "event_tolerance": self.event_tolerance, "max_ic_repair": self.max_ic_repair,
             "on_chattering": self.on_chattering,
             "max_chattering_events": self.max_chattering_events,
             "record": {"interval": self.record_interval,
                        "signals": None if self.record_signals is None else list(self.record_signals)},
             "metrics": [m.to_dict() for m in self.metrics]}
        return d

    def to_json(self):
        return json.dumps(self.to_dict(), sort_keys=True)

    def to_yaml(self):
        import yaml
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def replace(self, **changes):
        """A new validated spec with ``changes`` (keys of the file vocabulary)."""
        d = self.to_dict()
        for key, value in changes.items():
            if key == "params":
                d["params"] = {**d["params"], **value}
            elif key == "record_interval":
                d["record"]["interval"] = value
            elif key == "record_signals":
                d["record"]["signals"] = value
            else:
                d[key] = value
        return SimulationSpec.from_dict(d)

    def with_parameter(self, name, value):
        """The spec with one varied quantity: a model parameter (``l``), ``params.l``,
        or a top-level number (``rtol``, ``stop_time``, ``blocks.pd.kp``...)."""
        if name.startswith("blocks."):
            _, blk, key = name.split(".", 2)
            blocks = thaw(self.blocks)
            for b in blocks:
                if b.get("name") == blk:
                    b[key] = value
                    return self.replace(blocks=blocks)
            raise SpecError(f"unknown block {blk!r} in {name!r} (blocks: "
                            f"{', '.join(str(b.get('name')) for b in blocks) or 'none'})")
        if name.startswith("params."):
            return self.replace(params={name[7:]: value})
        if name in ("rtol", "atol", "h", "start_time", "stop_time", "communication_step",
                    "event_tolerance"):
            return self.replace(**{name: value})
        return self.replace(params={name: value})

    # -- resolved values --------------------------------------------------------------------
    def model_reference(self, allow_files=False):
        """What :func:`cosim.models.load_model` gets for this plant.  A ``file.py:Class``
        path is loaded only when the caller (the command line, whose arguments the user
        typed) allows it; a spec file cannot make cosim execute a file.  URDF: the hook
        for the URDF loader (``cosim.models`` resolves ``{"urdf": path}``)."""
        from .model_files import is_file_spec, load_model_file
        if self.model_format == "urdf":
            return self._urdf_reference()
        if is_file_spec(self.model) and allow_files:
            return load_model_file(self.model)
        return self.model

    def _urdf_reference(self):
        """The robot as the model spec of :mod:`cosim.models.urdf` (the text travels)."""
        return {"urdf_text": self.model, **thaw(self.urdf_options)}

    def resolved_method(self, model=None):
        return self.method

    def resolved_stop_time(self, model=None):
        """(stop_time, source)."""
        return self.stop_time, "stop_time"


def parse_yaml(text, source="spec"):
    """Plain data from YAML/JSON text: safe loader only (no tags, no code), bounded size,
    depth and alias expansion (:mod:`cosim.safe_yaml`)."""
    from .safe_yaml import load_text
    return load_text(text, source)


def read_file(path, what="spec"):
    """(data, path) of a spec or scenario file, read with at most MAX_SPEC_BYTES + 1 bytes.
    A path is taken literally; only a bare name (no folder) that is not a file here
    resolves to a shipped scenario.  Errors say ``what`` it was and name the path as given.
    The data names no code but the library's (:func:`cosim.code_refs.check_data`)."""
    from .safe_yaml import read_path
    from .scenario import resolve
    given = str(path)
    path = resolve(path)
    try:
        data = read_path(path, f"{what} {given!r}")
    except OSError as exc:
        from .shipped import scenario_names
        raise SpecError(f"cannot read {what} {given!r}: {exc.strerror} (shipped scenarios, "
                        f"usable by bare name: {', '.join(scenario_names())})") from None
    from .code_refs import check_data
    check_data(data, str(path))  # a file names no code: refused before anything is imported
    return data, path


def _plant_class(model, model_format, urdf_options=None):
    """The plant's class (for the default method and stop time)."""
    from .models import model_class
    if model_format == "urdf":
        model = {"urdf_text": model, **(urdf_options or {})}
    try:
        return model_class(model)
    except CosimError as exc:
        raise SpecError(f"model: {exc}") from None


FILE_KEYS = ("name", "description", "model", "params", "method", "rtol", "atol", "h",
             "method_options", "backend", "start_time", "stop_time", "communication_step",
             "blocks", "connections", "inputs", "event_tolerance", "max_ic_repair", "on_chattering",
             "max_chattering_events", "record", "metrics")


def load_spec(source, **changes):
    """A :class:`SimulationSpec` from what a user has at hand, then ``changes`` (keys of
    the spec vocabulary, as :meth:`SimulationSpec.replace`):

    * a :class:`SimulationSpec` (returned as it is);
    * a spec or scenario file (YAML/JSON; a path that exists, or ends in .yaml/.yml/.json);
    * the name of a shipped scenario (``cosim scenarios``), e.g. ``"pendulum_pd"``;
    * the name of a model (``cosim models``, or ``package.module:Class``): the model with
      its defaults (method, stop time) in communication steps of 10 ms.

    A name that is both a shipped scenario and a model (``bouncing_ball``) is the scenario,
    as for ``cosim run``."""
    import os

    from .shipped import scenario_names, shipped_scenario
    if isinstance(source, SimulationSpec):
        spec = source
    elif isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        if os.path.exists(text) or text.lower().endswith((".yaml", ".yml", ".json")) or \
                shipped_scenario(text) is not None:
            spec = SimulationSpec.load(text)
        else:
            from .models import model_class
            try:
                model_class(text)
            except CosimError as exc:
                raise SpecError(f"{text!r} is not a spec file, a shipped scenario "
                                f"({', '.join(scenario_names())}) or a model: {exc}") from None
            spec = SimulationSpec.from_dict({"model": text}, source=f"model {text!r}")
            spec = spec.replace(name=text)
    else:
        raise SpecError(f"a spec is a SimulationSpec, a file, a scenario name or a model name, "
                        f"got {type(source).__name__}")
    return spec.replace(**changes) if changes else spec


__all__ = ["SimulationSpec", "Metric", "FrozenMap", "SpecError", "load_spec", "typed_method_options",
           "MAX_SPEC_BYTES", "METRIC_KINDS"]
