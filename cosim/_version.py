"""The version and the distribution name, in one place (pyproject.toml reads
``__version__`` from here).  The import name is ``cosim``; the distribution on the
package index is ``cosim-mbs`` (the name ``cosim`` belongs to an unrelated project)."""
__version__ = "0.1.0"
DISTRIBUTION = "cosim-mbs"


def install_hint(extra):
    """The pip command that installs an extra, e.g. ``pip install 'cosim-mbs[fast]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"
