"""The model library.  ``load_model("andrews", **params)`` builds a model."""
import copy
from collections.abc import Mapping

from .._registry import load_symbol, user_class_spec
from ..errors import UnknownModelError
from .base import Event, FirstOrderModel, Model, MultibodyModel, Parameter, Signal, check_inputs

# name -> "module:Class" (relative to this package); imported on first use.
MODEL_REGISTRY = {
    "pendulum": ".pendulum:Pendulum",
    "andrews": ".andrews:Andrews",
    "two_link": ".two_link:TwoLink",
    "double_pendulum_natural": ".double_pendulum_natural:DoublePendulumNatural",
    "lti": ".lti:LTIModel",
    "crank_slider": ".crank_slider:CrankSlider",
    "bouncing_ball": ".bouncing_ball:BouncingBall",
    "knife_edge": ".knife_edge:KnifeEdge",
    "heavy_top": ".heavy_top:HeavyTop",
}


def is_urdf_spec(model):
    """True for a URDF model spec: a mapping ``{"urdf_text": ...}`` (or a ``.urdf`` path)."""
    if isinstance(model, Mapping):
        return "urdf_text" in model or "urdf" in model
    return isinstance(model, str) and ":" not in model and model.lower().endswith(".urdf")


def model_class(name):
    """The class registered under ``name``, given as ``package.module:Class``, or of
    the robot of a URDF spec ``{"urdf_text": TEXT, "frames": [...], "position_limits": b}``
    (:mod:`cosim.models.urdf`)."""
    if isinstance(name, Mapping):
        if "urdf_text" in name:
            from .urdf import model_from_spec
            return model_from_spec(name)
        raise UnknownModelError(
            f"model spec {sorted(name)!r}: give the URDF text as {{'urdf_text': ...}}; a URDF "
            f"file path is read only on the cosim command line, relative to a scenario file "
            f"or from the ROS node's urdf_file parameter")
    if isinstance(name, str) and is_urdf_spec(name):
        raise UnknownModelError(
            f"model {name!r}: a URDF file is read only on the cosim command line (cosim "
            f"simulate/fmu build ROBOT.urdf), relative to a scenario file (model: {{urdf: "
            f"PATH}}) or by the ROS node (urdf_file, robot_description); in Python "
            f"Simulation(model=PATH) or cosim.models.urdf.load_urdf(PATH)")
    if not isinstance(name, str):
        raise UnknownModelError(f"model must be a name or a Model, got {name!r}")
    if user_class_spec(name):
        if name.rpartition(":")[0].endswith(".py"):
            raise UnknownModelError(
                f"model {name!r}: a file path is accepted only on the cosim command line "
                f"(cosim simulate/check FILE.py:Class); elsewhere give an importable "
                f"package.module:Class, or pass the class or an instance in Python")
        try:
            cls = load_symbol(name)
        except ModuleNotFoundError as exc:
            module = name.partition(":")[0]
            raise UnknownModelError(
                f"cannot load user model {name!r}: {exc} — the module must be importable "
                f"(installed, or its directory on PYTHONPATH); on the command line a file "
                f"also works: path/to/{module.split('.')[-1]}.py:{name.partition(':')[2]}") from None
        except (ImportError, AttributeError) as exc:
            raise UnknownModelError(f"cannot load user model {name!r}: {exc}") from None
        if not (isinstance(cls, type) and issubclass(cls, Model)):
            raise UnknownModelError(f"{name!r} is not a cosim Model subclass")
        return cls
    if name not in MODEL_REGISTRY:
        raise UnknownModelError(
            f"unknown model {name!r} (available: {', '.join(available_models())})")
    return load_symbol(MODEL_REGISTRY[name], package=__name__)


def available_models():
    """Names of the library models whose module imports."""
    names = []
    for name in MODEL_REGISTRY:
        try:
            load_symbol(MODEL_REGISTRY[name], package=__name__)
        except (ImportError, AttributeError):
            continue
        names.append(name)
    return names


def load_model(model, **params):
    """A model instance from a name, a ``module:Class`` spec, a Model subclass, or an
    instance.  An instance is copied (``params`` applied to the copy): the caller's
    model is never changed, so one instance can serve many simulations at once."""
    if isinstance(model, Model):
        try:
            model = copy.deepcopy(model)
        except Exception:  # e.g. a user model holding a lock: copy what parameters touch
            model = copy.copy(model)
            model.params = dict(model.params)
        for key, value in params.items():
            model.set_parameter(key, value)
        return model
    if isinstance(model, type) and issubclass(model, Model):
        return model(**params)
    return model_class(model)(**params)


def describe_model(model):
    """What a model declares, as plain data (``cosim models NAME --json``): ``name``,
    ``description``, ``kind``, ``states`` (and for multibody models ``coordinates`` and
    ``constraints``), ``parameters`` (name, default, unit, description, tunable),
    ``inputs`` (name, unit, default, description), ``outputs`` (name, unit,
    description), ``events`` (name, direction, terminal) and ``configuration`` (keyword
    arguments that are not parameters, e.g. the LTI model's matrices; may be empty).
    ``model``: anything :func:`load_model` takes (an instance is described as it is)."""
    if not isinstance(model, Model):
        model = load_model(model)
    info = {"name": model.name, "description": " ".join(str(model.description).split()),
            "kind": model.kind, "states": list(model.state_names)}
    if model.kind == "multibody":
        info["coordinates"] = list(model.coordinates)
        info["constraints"] = list(model.constraint_names)
    info["parameters"] = [{"name": p.name, "default": float(model.params.get(p.name, p.default)),
                           "unit": p.unit, "description": p.description, "tunable": bool(p.tunable)}
                          for p in model.parameters]
    info["inputs"] = [{"name": s.name, "unit": s.unit, "default": float(s.default),
                       "description": s.description} for s in model.inputs]
    info["outputs"] = [{"name": s.name, "unit": s.unit, "description": s.description}
                       for s in model.outputs]
    info["events"] = [{"name": e.name, "direction": int(e.direction), "terminal": bool(e.terminal)}
                      for e in model.events]
    info["configuration"] = list(getattr(type(model), "configuration_keys", ()))
    return info


__all__ = ["Event", "FirstOrderModel", "Model", "MultibodyModel", "Parameter", "Signal",
           "MODEL_REGISTRY", "available_models", "check_inputs", "describe_model", "is_urdf_spec", "load_model",
           "model_class"]
