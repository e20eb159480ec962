"""``cosim sweep SPEC.yaml [SPEC2.yaml ...]``: many runs on Dask (:mod:`cosim.sweep`).

Variations: ``--grid NAME=START:STOP:COUNT`` (repeatable: full factorial),
``--samples N --dist NAME=normal(MEAN,SD)`` (Latin hypercube, or ``--sampling
random``; ``--seed`` to repeat, else a recorded random seed), or several spec files.
Cluster: none given -> an embedded LocalCluster (one process per core, TLS with a
certificate made for the run: no other process can submit work to it);
``--scheduler tls://HOST:PORT`` (the TLS settings of your Dask configuration),
``tcp://HOST:PORT`` or a scheduler file -> that cluster.  Writes
``OUT/runs.parquet`` and ``OUT/timeseries.parquet``, prints a summary, and with
``--plot`` a figure (if matplotlib is installed).
"""
import json
import logging

from ..errors import SpecError
from ..options import check_output_dir, check_plot_path


def _cmd(args):
    from ..spec import SimulationSpec
    from ..sweep import check_timeout, make_variations, require_sweep_extra, sweep, write_plot
    require_sweep_extra("`cosim sweep`")
    check_plot_path(args.plot)
    check_output_dir(args.out)
    timeout = check_timeout(args.timeout)
    specs = [SimulationSpec.load(p) for p in args.spec]
    if args.workers is not None and args.workers < 1:
        raise SpecError(f"--workers must be >= 1, got {args.workers!r}")
    variations = make_variations(specs[0], args.grid or (), args.dist or (), args.samples, args.seed,
                                 args.sampling)
    if len(specs) > 1 and variations.names:
        raise SpecError("give several spec files or variations (--grid/--dist) of one spec, not both")
    logging.getLogger("distributed").setLevel(logging.ERROR)  # one-line errors, no log noise
    result = sweep(specs[0], variations, scheduler=args.scheduler, workers=args.workers,
                   timeout=timeout, progress=False if args.json else None,  # bar after 2 s
                   specs=specs if len(specs) > 1 else None, labels=list(args.spec))
    paths = result.write(args.out)
    plotted = write_plot(args.plot, result) if args.plot else None
    if args.json:
        print(json.dumps({"runs": len(result.results), "failed": len(result.failures),
                          "seed": result.variations.seed, "files": list(paths),
                          "wall_time_s": result.wall_time_s, "cluster": result.cluster,
                          "plot": args.plot if plotted else None}))
        return 0
    for line in result.summary_lines():
        print(line)
    print(f"  wrote {paths[0]} and {paths[1]}")
    if args.plot:
        print(f"  wrote {args.plot}" if plotted else "  no plot: matplotlib is not installed")
    return 0


def register(sub):
    p = sub.add_parser("sweep", help="parameter sweep / Monte Carlo of a spec on Dask")
    p.add_argument("spec", nargs="+", help="spec or scenario file(s) (YAML/JSON), or shipped scenario names")
    p.add_argument("--grid", action="append", metavar="NAME=START:STOP:COUNT",
                   help="vary NAME over COUNT points from START to STOP (or NAME=V1,V2,...); "
                        "repeatable: full factorial. NAME: a model parameter, rtol, stop_time, "
                        "blocks.BLOCK.KEY, ...")
    p.add_argument("--samples", type=int, default=None, metavar="N", help="number of random samples")
    p.add_argument("--dist", action="append", metavar="NAME=normal(MEAN,SD)",
                   help="distribution of NAME: normal(MEAN,SD), uniform(LOW,HIGH), lognormal(MU,SIGMA)")
    p.add_argument("--sampling", choices=("lhs", "random"), default="lhs",
                   help="Latin hypercube (default) or plain random samples")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: a new one, printed)")
    p.add_argument("--scheduler", default=None, metavar="tls://HOST:PORT|tcp://HOST:PORT|FILE",
                   help="an existing Dask scheduler (address or scheduler file; tls:// uses the TLS "
                        "settings of your Dask configuration, distributed.comm.tls.*); default: an "
                        "embedded LocalCluster on 127.0.0.1, one worker process per core, TLS with "
                        "a certificate made for the run")
    p.add_argument("--workers", type=int, default=None, help="embedded cluster: number of worker processes")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds to wait for the scheduler file, the scheduler and its first worker "
                        "(default 10)")
    p.add_argument("--out", default="sweep_results", metavar="DIR",
                   help="folder for runs.parquet and timeseries.parquet (default sweep_results)")
    p.add_argument("--plot", metavar="FILE.png", help="trajectory envelope and metrics vs parameters")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd)
