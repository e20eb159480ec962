"""The FMU's Python code as one private package (FMU isolation).

Every build copies the ``cosim`` core (without the command line, the sweep and
the ROS launch files: :data:`COSIM_EXCLUDED`), the slave runtime (``fmu``), the parts
of ``pythonfmu`` the slave uses and any user model package under a package
named for that build (``cosim_fmu_<12 hex digits of the GUID>``), and rewrites
their absolute imports of these top-level names to it (``from cosim.x import
y`` -> ``from cosim_fmu_1a2b....cosim.x import y``).  The FMU binary imports
the package from its resources folder without touching ``sys.path``, so two
cosim FMUs of different builds and a host that imports ``cosim`` itself never
share a module.
"""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

# parts of the cosim package a slave never imports: the command line, the sweep (Dask)
# and the ROS launch files; cosim/__init__.py binds `cosim.sweep`, so the FMU gets a stub
COSIM_EXCLUDED = ("commands", "cli.py", "__main__.py", "variations.py", "data/launch")
SWEEP_STUB = ('"""cosim.sweep is not part of an FMU (it runs many simulations on Dask): use the '
              'cosim package."""\n\n\ndef sweep(*args, **kwargs):\n    raise NotImplementedError('
              '"cosim.sweep is not part of an FMU; install cosim and use cosim.sweep there")\n')
PYTHONFMU_FILES = ("_version.py", "enums.py", "fmi2slave.py", "variables.py",
                   "default_experiment.py", "logmsg.py")
FMU_FILES = ("__init__.py", "slave.py", "examples.py")


def package_name(guid):
    return "cosim_fmu_" + str(guid).replace("-", "")[:12]


def _rewrite(source, pkg, tops):
    """``source`` with absolute imports of ``tops`` moved under ``pkg`` (positions from ast)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def pos(lineno, col):  # ast columns are UTF-8 byte offsets
        line = lines[lineno - 1]
        return offsets[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8"))

    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] in tops:
            start = pos(node.lineno, node.col_offset)
            text = source[start:pos(node.end_lineno, node.end_col_offset)]
            head = text.index(node.module, len("from"))
            edits.append((start + head, start + head + len(node.module), f"{pkg}.{node.module}"))
        elif isinstance(node, ast.Import) and any(a.name.split(".")[0] in tops for a in node.names):
            parts = []
            for a in node.names:
                top = a.name.split(".")[0]
                if top not in tops:
                    parts.append(f"import {a.name}" + (f" as {a.asname}" if a.asname else ""))
                elif a.asname:
                    parts.append(f"import {pkg}.{a.name} as {a.asname}")
                else:  # `import cosim.x` binds `cosim`
                    parts.append(f"import {pkg}.{a.name}; from {pkg} import {top}")
            edits.append((pos(node.lineno, node.col_offset),
                          pos(node.end_lineno, node.end_col_offset), "; ".join(parts)))
    for start, end, text in sorted(edits, reverse=True):
        source = source[:start] + text + source[end:]
    return source


def _copy_tree(src, dst, pkg, tops, files=None, exclude=()):
    src, dst = Path(src), Path(dst)
    paths = [src / f for f in files] if files else sorted(src.rglob("*"))
    for path in paths:
        rel = path.relative_to(src)
        if any(p.startswith(".") or p == "__pycache__" or p.endswith(".egg-info") for p in rel.parts):
            continue
        if any(rel.as_posix() == x or rel.as_posix().startswith(x + "/") for x in exclude):
            continue
        target = dst / rel
        if path.is_dir():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".py":
            target.write_text(_rewrite(path.read_text(encoding="utf-8"), pkg, tops), encoding="utf-8")
        elif path.suffix not in (".pyc", ".pyo"):
            shutil.copy2(path, target)


def stage_package(root, pkg, *, cosim_dir, fmu_dir, pythonfmu_dir, user_paths, identifier,
                  description):
    """Write the private package ``root/pkg`` and return its path."""
    user_paths = list(user_paths)
    tops = {"cosim", "fmu", "pythonfmu"} | {Path(p).stem if Path(p).is_file() else Path(p).name
                                            for p in user_paths}
    base = Path(root) / pkg
    base.mkdir(parents=True)
    (base / "__init__.py").write_text(
        f'"""Private copy of the code of FMU {identifier} (cosim fmu build); see fmu/bundle.py."""\n')
    _copy_tree(cosim_dir, base / "cosim", pkg, tops, exclude=COSIM_EXCLUDED + ("sweep.py",))
    (base / "cosim" / "sweep.py").write_text(SWEEP_STUB, encoding="utf-8")
    _copy_tree(fmu_dir, base / "fmu", pkg, tops, files=FMU_FILES)
    _copy_tree(pythonfmu_dir, base / "pythonfmu", pkg, tops, files=PYTHONFMU_FILES)
    (base / "pythonfmu" / "__init__.py").write_text(
        '"""The parts of pythonfmu the slave uses (modelDescription types)."""\n'
        "from ._version import __version__\n")
    for path in user_paths:
        path = Path(path)
        if path.is_dir():
            _copy_tree(path, base / path.name, pkg, tops)
        else:
            (base / path.name).write_text(_rewrite(path.read_text(encoding="utf-8"), pkg, tops),
                                          encoding="utf-8")
    (base / "slave_module.py").write_text(
        f'"""FMI 2.0 co-simulation slave {identifier} (generated by `cosim fmu build`)."""\n'
        "from .fmu.slave import CosimSlave\n\n\n"
        f"class {identifier}(CosimSlave):\n"
        f"    {description!r}\n\n\n"
        f"SLAVE_CLASS = {identifier}\n")
    return base
