"""``cosim models``, ``cosim methods``, ``cosim scenarios``: what exists.  ``cosim models``
shows each library model's parameters, inputs and outputs with units and defaults;
``cosim models MODEL`` one model in detail (a library name, a URDF file, ``file.py:Class``
or ``package.module:Class``)."""
import argparse
import json

from .._registry import load_symbol
from ..integrators import METHOD_REGISTRY
from ..models import MODEL_REGISTRY, describe_model


def _list(registry, package):
    for name, spec in registry.items():
        try:
            cls = load_symbol(spec, package=package)
        except (ImportError, AttributeError):
            continue
        print(f"{name:26s} {cls.description}")
    return 0


def _short(value):
    return f"{float(value):.6g}"


def _packed(label, items, width=100, indent=4):
    """``label`` then ``items`` joined by ", ", wrapped at ``width`` between items."""
    head = " " * indent + f"{label:12s}"
    lines, line = [], head
    for k, item in enumerate(items or ["none"]):
        piece = item + ("," if k < len(items) - 1 else "")
        if line != head and len(line) + 1 + len(piece) > width:
            lines.append(line)
            line = " " * len(head) + piece
        else:
            line = line + ("" if line == head else " ") + piece
    lines.append(line)
    return lines


def summary_lines(info):
    """A model in four lines or so (``cosim models``)."""
    lines = [f"{info['name']:26s} {info['description']}"]
    if info["configuration"]:
        lines += _packed("configured", list(info["configuration"]))
    lines += _packed("parameters", [f"{p['name']}={_short(p['default'])} [{p['unit']}]"
                                    for p in info["parameters"]])
    lines += _packed("inputs", [f"{s['name']}={_short(s['default'])} [{s['unit']}]"
                                for s in info["inputs"]])
    lines += _packed("outputs", [f"{s['name']} [{s['unit']}]" for s in info["outputs"]])
    return lines


def _table(header, rows, indent=2):
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    out = []
    for r in [header, *rows]:
        out.append((" " * indent + "  ".join(f"{str(c):{w}s}" for c, w in zip(r, widths))).rstrip())
    return out


def detail_lines(info):
    """Everything a model declares (``cosim models MODEL``); defaults printed exactly."""
    lines = [f"{info['name']}: {info['description']}" if info["description"] else info["name"],
             f"kind: {info['kind']}"]
    if info["kind"] == "multibody":
        lines.append(f"coordinates ({len(info['coordinates'])}): {', '.join(info['coordinates'])}")
        lines.append(f"constraints ({len(info['constraints'])}): "
                     f"{', '.join(info['constraints']) or 'none'}")
    lines.append(f"states ({len(info['states'])}): {', '.join(info['states'])}")
    if info["configuration"]:
        lines.append("configuration (keyword arguments, not parameters): "
                     + ", ".join(info["configuration"]))
    lines.append(f"parameters ({len(info['parameters'])}; * tunable between communication steps):")
    if info["parameters"]:
        lines += _table(("name", "default", "unit", "description"),
                        [(p["name"] + (" *" if p["tunable"] else ""), repr(p["default"]), p["unit"],
                          p["description"]) for p in info["parameters"]])
    lines.append(f"inputs ({len(info['inputs'])}; held over each communication step):")
    if info["inputs"]:
        lines += _table(("name", "default", "unit", "description"),
                        [(s["name"], repr(s["default"]), s["unit"], s["description"])
                         for s in info["inputs"]])
    lines.append(f"outputs ({len(info['outputs'])}):")
    if info["outputs"]:
        lines += _table(("name", "unit", "description"),
                        [(s["name"], s["unit"], s["description"]) for s in info["outputs"]])
    if info["events"]:
        lines.append(f"events ({len(info['events'])}):")
        lines += _table(("name", "direction", "terminal"),
                        [(e["name"], {1: "rising", -1: "falling", 0: "both"}[e["direction"]],
                          "yes" if e["terminal"] else "no") for e in info["events"]])
    return lines


def _models(args):
    if args.model is None:
        infos = []
        for name, spec in MODEL_REGISTRY.items():
            try:
                cls = load_symbol(spec, package="cosim.models")
            except (ImportError, AttributeError):
                continue
            infos.append(describe_model(cls))
        if args.json:
            print(json.dumps(infos))
        else:
            for k, info in enumerate(infos):
                print(("\n" if k else "") + "\n".join(summary_lines(info)))
            print("\none model in detail: cosim models NAME (also ROBOT.urdf, file.py:Class)")
        return 0
    from ..model_files import resolve_cli_model
    info = describe_model(resolve_cli_model(args.model, tuple(args.frame or ()), args.position_limits))
    print(json.dumps(info) if args.json else "\n".join(detail_lines(info)))
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
    p = sub.add_parser("models", help="list the model library (parameters, inputs, outputs); "
                                      "cosim models MODEL: one model in detail")
    p.add_argument("model", nargs="?", metavar="MODEL",
                   help="a library model name, ROBOT.urdf, path/to/file.py:Class or package.module:Class")
    p.add_argument("--frame", action="append", metavar="NAME",
                   help="robot from URDF: a link/joint frame whose pose becomes outputs (repeatable)")
    p.add_argument("--position-limits", action=argparse.BooleanOptionalAction, default=None,
                   help="robot from URDF: the joints' position limits as stops that hold (default: "
                        "on; --no-position-limits: the joints move past them)")
    p.add_argument("--json", action="store_true", help="print JSON (a list, or one object for MODEL)")
    p.set_defaults(func=_models)
    p = sub.add_parser("methods", help="list the integration methods")
    p.set_defaults(func=lambda args: _list(METHOD_REGISTRY, "cosim.integrators"))
    p = sub.add_parser("scenarios", help="list the shipped scenarios (cosim run NAME runs one)")
    p.set_defaults(func=_scenarios)
