"""The documentation builds and its examples run.

1. ``sphinx-build -W`` (warnings are errors) builds docs/ into a temporary folder:
   a broken cross-reference, a missing page in the toctree or a docstring the API
   reference cannot render fails here.
2. Every ```python block of README.md and docs/**/*.md runs as a script, each in a
   fresh subprocess in its own temporary working directory with a time limit; a
   failure names the file and line of the block.
3. A ```bash block preceded by the line ``<!-- docs-test: run -->`` runs the same
   way under ``bash -e`` (commands that are cheap: the README's first-screen CLI
   examples are marked so).

A block preceded by ``<!-- docs-test: file NAME -->`` is not run: it is written to
NAME in the working directory of every block of the same document (a user model
that a later ``cosim check NAME:Class`` block uses).
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
SOURCES = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]
SOURCES = [p for p in SOURCES if "_build" not in p.parts]
TIMEOUT = 60          # s per block; the examples take 1-5 s each
FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!-- docs-test: (run|file (\S+)) -->\s*$")


def blocks(path):
    """(language, first line number of the code, code, marker) of every fenced block."""
    lines = path.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m and lines[i].strip() != "```":
            lang, start = m.group(1), i + 1
            marker = MARKER.match(lines[i - 1]) if i else None
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            out.append((lang, start + 1, "\n".join(lines[start:j]) + "\n", marker))
            i = j + 1
        else:
            i += 1
    return out


def _cases():
    cases = []
    for path in SOURCES:
        for lang, line, code, marker in blocks(path):
            if marker and marker.group(2):
                continue                              # a file for other blocks
            if lang == "python" or (lang == "bash" and marker):
                rel = path.relative_to(REPO)
                cases.append(pytest.param(path, lang, line, code, id=f"{rel}:{line}"))
    return cases


def _files(path):
    return {m.group(2): code for _, _, code, m in blocks(path) if m and m.group(2)}


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    bindir = str(Path(sys.executable).parent)        # cosim, cosim-ros, fmpy of this venv
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env["MPLBACKEND"] = "Agg"
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    return env


def test_every_example_block_is_found():
    """The parser sees the README's first-screen examples (a changed fence or
    marker would silently run nothing)."""
    ids = [c.id for c in _cases()]
    assert sum(i.startswith("README.md:") for i in ids) >= 2, ids
    assert len(ids) >= 15, ids


@pytest.mark.parametrize("path,lang,line,code", _cases())
def test_example_runs(path, lang, line, code, tmp_path):
    for name, text in _files(path).items():
        (tmp_path / name).write_text(text)
    script = tmp_path / ("example.py" if lang == "python" else "example.sh")
    script.write_text(code)
    cmd = [sys.executable, script.name] if lang == "python" else ["bash", "-e", "-o", "pipefail", script.name]
    where = f"{path.relative_to(REPO)}:{line}"
    try:
        proc = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True,
                              timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the {lang} block at {where} did not finish within {TIMEOUT} s")
    assert proc.returncode == 0, (f"the {lang} block at {where} exited {proc.returncode}:\n"
                                  f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def test_docs_build_strict(tmp_path):
    """sphinx-build -W: the site builds without a warning."""
    try:
        import myst_parser  # noqa: F401
        import sphinx  # noqa: F401
    except ImportError as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"{e.name} is not installed (pip install '.[docs]')")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           str(DOCS), str(tmp_path / "html")], cwd=REPO, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"sphinx-build -W failed:\n{proc.stdout[-5000:]}\n{proc.stderr[-5000:]}"
    assert (tmp_path / "html" / "index.html").is_file()
