"""Sphinx configuration of the cosim documentation (MyST Markdown + autodoc).

Build: ``sphinx-build -W -b html docs docs/_build/html`` (``-W``: warnings are
errors, as in CI: tests/test_docs.py).
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))          # document this checkout's cosim, not an installed one

import cosim  # noqa: E402

project = "cosim"
author = "cosim contributors"
release = cosim.__version__
version = ".".join(release.split(".")[:2])
copyright = "cosim contributors"

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3               # [text](page.md#a-heading) links
suppress_warnings = []

autodoc_member_order = "bysource"
autodoc_typehints = "none"

html_theme = "alabaster"
html_title = f"cosim {release}"
html_theme_options = {"description": "co-simulation of multibody DAEs, ODEs and LTI plants "
                                     "as an FMU and a ROS 2 node",
                      "fixed_sidebar": True}
html_static_path = []
