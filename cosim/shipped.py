"""Files shipped inside the package (``cosim/data``): scenarios, ROS 2 parameter
YAML and launch files.  They are package data, so they exist after a plain
``pip install .`` as well as in a checkout (where ``scenarios/`` and ``launch/``
at the top are links to these folders).
"""
from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


def scenario_dir() -> Path:
    """The folder of the shipped scenarios (``cosim scenarios`` lists them)."""
    return DATA / "scenarios"


def launch_dir() -> Path:
    """The folder of the ROS 2 parameter files and launch files."""
    return DATA / "launch"


def scenario_names() -> list[str]:
    """Names of the shipped scenarios (file stems), sorted."""
    return sorted(p.stem for p in scenario_dir().glob("*.yaml"))


def shipped_scenario(name) -> Path | None:
    """The shipped scenario called ``name`` (with or without ``.yaml``), else None.

    Only a bare name is looked up (no folders), so this never reaches outside
    ``scenario_dir()``.
    """
    name = str(name)
    if not name or "/" in name or "\\" in name or name.startswith("."):
        return None
    stem = name[:-5] if name.endswith(".yaml") else name
    return scenario_dir() / f"{stem}.yaml" if stem in scenario_names() else None


def ros_config_names() -> list[str]:
    """Names of the shipped ROS 2 parameter files (``cosim-ros --ros-args -p config:=NAME``)."""
    return sorted(p.stem for p in launch_dir().glob("*.yaml"))


def ros_config(name) -> Path | None:
    """The shipped ROS 2 parameter file called ``name`` (with or without ``.yaml``), else
    None.  Only a bare name is looked up, so this never reaches outside ``launch_dir()``."""
    name = str(name)
    if not name or "/" in name or "\\" in name or name.startswith("."):
        return None
    stem = name[:-5] if name.endswith(".yaml") else name
    return launch_dir() / f"{stem}.yaml" if stem in ros_config_names() else None


def file_summary(path) -> str:
    """The first sentence of the comment block at the top of a shipped YAML file."""
    lines = []
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if not line.startswith("#"):
                    break
                lines.append(line[1:].strip())
    except OSError:
        return ""
    text = " ".join(" ".join(lines).split())
    return text.split(". ")[0].rstrip(".")
