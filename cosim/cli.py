"""The ``cosim`` command line, one subcommand per library function.

Subcommands: ``models``, ``methods``, ``scenarios``, ``simulate`` (one model), ``sweep`` (many runs), ``check`` (a
model), ``run`` (a scenario), ``demo`` (the README's first command), ``warmup`` (compile kernels),
plus plugins registered under the ``cosim.commands`` entry-point
group (the ``fmu`` package adds ``cosim fmu build``).  A :class:`CosimError`
prints one line ``cosim: error: ...`` and exits with code 2; a warning (an
option used with another value than given, see :mod:`cosim.options`) prints one
line ``cosim: warning: ...`` on stderr.  A command whose optional extra is not
installed prints one line naming the extra (:mod:`cosim.extras`) and exits with 2.
"""
import argparse
import importlib
import os
import sys
import warnings
from importlib.metadata import entry_points

from ._version import DISTRIBUTION, __version__
from .errors import CosimError

DESCRIPTION = ("cosim: co-simulation of multibody DAEs, ODEs and LTI plants in communication steps "
               "with zero-order-hold inputs; FMI 2.0 FMUs and a ROS 2 node (cosim-ros).")

# subcommand -> module in cosim.commands defining register(subparsers)
CORE_COMMANDS = ("listing", "simulate", "run", "sweep", "check", "demo", "warmup", "new_model")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="cosim", description=DESCRIPTION,
        epilog="`cosim COMMAND --help` describes a command; the manual is in the docs/ folder of "
               "the source distribution.")
    parser.add_argument("--version", action="version",
                        version=f"cosim {__version__} (distribution {DISTRIBUTION}, Python "
                                f"{sys.version.split()[0]})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in CORE_COMMANDS:
        try:
            module = importlib.import_module(f".commands.{name}", package=__package__)
        except ImportError:
            continue
        module.register(sub)
    seen = set()
    for ep in entry_points(group="cosim.commands"):
        if ep.name in seen:  # the same plugin from a second installed distribution
            continue
        seen.add(ep.name)
        try:
            ep.load()(sub)
        except ImportError:
            continue  # optional extra not installed
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """Warnings (an option used with another value, a backend fall-back, ...) as
    one line ``cosim: warning: ...`` on stderr, without the source line."""
    print(f"cosim: warning: {message}", file=sys.stderr if file is None else file, flush=True)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        return int(args.func(args) or 0)
    except CosimError as exc:
        print(f"cosim: error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:  # an optional extra is not installed: one line naming it
        from .extras import missing_extra
        text = missing_extra(exc, f"`cosim {args.command}`")
        if text is None:
            raise
        print(f"cosim: error: {text}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:   # before a run started (a run keeps its rows: RunInterrupted)
        print("cosim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `cosim models | head -1`: the reader left; no traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports it
    finally:
        warnings.showwarning = previous


if __name__ == "__main__":
    sys.exit(main())
