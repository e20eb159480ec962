"""``cosim check MODEL`` (alias ``check-model``): the model checker
(:mod:`cosim.model_check`) — a table of every term with its largest mismatch
against differences; exit code 1 when a term fails."""
import json

from ..model_check import check_model
from ..model_files import resolve_cli_model
from .simulate import parse_assignments


def _cmd(args):
    report = check_model(resolve_cli_model(args.model), parse_assignments(args.param),
                         n_states=args.states, seed=args.seed, rtol=args.rtol)
    if args.json:
        print(json.dumps(report.as_dict()))
    else:
        print(report.table())
    return 0 if report.ok else 1


def register(sub):
    p = sub.add_parser("check", aliases=["check-model"],
                       help="check a model's derivatives, shapes, mass matrix and initial state")
    p.add_argument("model", help="library model name, path/to/file.py:Class or package.module:Class")
    p.add_argument("--param", action="append", metavar="NAME=VALUE", help="model parameter (repeatable)")
    p.add_argument("--states", type=int, default=3, help="random states besides the initial one (default 3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random states")
    p.add_argument("--rtol", type=float, default=1e-6,
                   help="relative tolerance of a term against differences (default 1e-6)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(func=_cmd)
