"""The ``cosim`` command line: a thin wrapper over the library API.

Subcommands: ``models``, ``methods``, ``simulate`` (one model), ``check`` (a model), ``run`` (a
scenario), plus plugins registered under the ``cosim.commands`` entry-point
group (the ``fmu`` package adds ``cosim fmu build``).  A :class:`CosimError`
prints one line ``cosim: error: ...`` and exits with code 2.
"""
import argparse
import importlib
import sys
from importlib.metadata import entry_points

from .errors import CosimError

# subcommand -> module in cosim.commands defining register(subparsers)
CORE_COMMANDS = ("listing", "simulate", "run", "check", "warmup")


def build_parser():
    parser = argparse.ArgumentParser(prog="cosim", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in CORE_COMMANDS:
        try:
            module = importlib.import_module(f".commands.{name}", package=__package__)
        except ImportError:
            continue
        module.register(sub)
    for ep in entry_points(group="cosim.commands"):
        try:
            ep.load()(sub)
        except ImportError:
            continue  # optional extra not installed
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CosimError as exc:
        print(f"cosim: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
