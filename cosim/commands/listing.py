"""``cosim models``, ``cosim methods``, ``cosim scenarios``: what exists, one line each."""
from .._registry import load_symbol
from ..integrators import METHOD_REGISTRY
from ..models import MODEL_REGISTRY


def _list(registry, package):
    for name, spec in registry.items():
        try:
            cls = load_symbol(spec, package=package)
        except (ImportError, AttributeError):
            continue
        print(f"{name:26s} {cls.description}")
    return 0


def _scenarios(args):
    from ..errors import SpecError
    from ..safe_yaml import read_path
    from ..shipped import (file_summary, launch_dir, ros_config, ros_config_names, scenario_dir,
                           scenario_names)

    for name in scenario_names():
        try:
            data = read_path(scenario_dir() / f"{name}.yaml", name) or {}
            data = data if isinstance(data, dict) else {}
            text = " ".join(str(data.get("description", "")).split())
            text = text.split(". ")[0].rstrip(".")  # the first sentence
            text = text if len(text) <= 100 else text[:99] + "…"
        except (OSError, SpecError) as exc:
            text = f"(unreadable: {exc})"
        print(f"{name:26s} {text}")
    print(f"\nrun one by name: cosim run NAME  (files in {scenario_dir()})")
    print("\nROS 2 parameter files (cosim-ros --ros-args -p config:=NAME; the PD controller: "
          "python -m ros_nodes.pd_controller --ros-args -p config:=NAME):")
    for name in ros_config_names():
        text = file_summary(ros_config(name))
        print(f"{name:26s} {text if len(text) <= 100 else text[:99] + '…'}")
    print(f"\nROS 2 parameter and launch files: {launch_dir()}")
    return 0


def register(sub):
    p = sub.add_parser("models", help="list the model library")
    p.set_defaults(func=lambda args: _list(MODEL_REGISTRY, "cosim.models"))
    p = sub.add_parser("methods", help="list the integration methods")
    p.set_defaults(func=lambda args: _list(METHOD_REGISTRY, "cosim.integrators"))
    p = sub.add_parser("scenarios", help="list the shipped scenarios (cosim run NAME runs one)")
    p.set_defaults(func=_scenarios)
