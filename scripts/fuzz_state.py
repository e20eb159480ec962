"""Fuzz the state-blob boundary (issue 14): mutate serialized states of every
method and check that each mutated blob is either rejected with StateError
leaving the simulation byte-for-byte unchanged, or accepted and then steps
(or fails a step cleanly with a cosim error, state unchanged) — never another
exception, a hang or a dead process.

    python scripts/fuzz_state.py --seconds 600 --seed 1     # long run
    python scripts/fuzz_state.py --cases 2613 --seed 1      # the same cases on every machine
    python scripts/fuzz_state.py --short                    # CI: 100 cases per configuration
    python scripts/fuzz_state.py --reproducers              # the issue's crafted blobs (JSON)

Prints the cases tried, rejected and accepted per configuration, every failure,
and every accepted blob whose next step then failed (cleanly, state unchanged):
the blob checks and the integrator disagree there.  What is left of those is
algorithm memory the checks cannot verify without redoing the steps (the upper factor
of a kept LU without its matrix, spark's q'' and λ at a restart point: finite and below
1e150 but absurd, where no check against the model covers it) and inputs within the bound ``set_inputs`` takes (1e12) that make the
dynamics too fast for the step budget (the
long mode's figures are in docs/known-gaps.md); ``--short`` finds 0 of 1500 (it found 4
before parameter values were refused where they enter, as ``set_parameter`` refuses
them -- cosim.models.ranges: at most 1e12 in size, a positive quantity at least 1e-12;
the model regular at the restored state -- and before the points of a BDF history
were checked against the equations of motion).
``--short`` is the mode the test suite runs in a subprocess
(tests/test_state_hardening.py), so a crash shows up as a failed test: a fixed
number of cases per configuration with seed 14, the same cases on every machine,
under a minute with the compile cache filled (stopped at 50 s of fuzzing if a
machine is slower, which it says).
Mutations work on the decoded tree (a leaf replaced by a hostile value, a key
dropped or added) and on the header text (a byte changed), always with the
checksum recomputed, plus raw byte flips without it.
"""
import argparse
import copy
import json
import math
import signal
import struct
import sys
import time
import warnings
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cosim  # noqa: E402
from cosim import serialization  # noqa: E402
from cosim.errors import CosimError, StateError  # noqa: E402

# (label, Simulation keyword arguments) covering every method and both backends
CONFIGS = [
    ("generalized-alpha/python", dict(model="pendulum", method="generalized-alpha", backend="python")),
    ("generalized-alpha/numba", dict(model="pendulum", method="generalized-alpha", backend="auto")),
    ("generalized-alpha-i2", dict(model="pendulum", method="generalized-alpha-i2")),
    ("bdf", dict(model="pendulum", method="bdf")),
    ("bdf-i2", dict(model="pendulum", method="bdf-i2")),
    ("bdf-i1", dict(model="pendulum", method="bdf-i1")),
    ("dopri5", dict(model="pendulum", method="dopri5")),
    ("rk4", dict(model="pendulum", method="rk4", h=1e-3)),
    ("rkc-penalty", dict(model="pendulum", method="rkc-penalty")),
    ("state-transition", dict(model="lti", method="state-transition")),
    ("local-index1", dict(model="pendulum", method="local-index1")),
    ("spark", dict(model="pendulum", method="spark", h=1e-3)),
    ("block-lstable", dict(model="pendulum", method="block-lstable", h=1e-3)),
    ("bouncing_ball/events", dict(model="bouncing_ball", method="dopri5")),
    ("pendulum_pd/blocks", "scenario:pendulum_pd"),
]
NEWTON = {"generalized-alpha/python", "generalized-alpha/numba", "generalized-alpha-i2", "bdf",
          "bdf-i2", "bdf-i1", "local-index1", "spark", "block-lstable"}
DT = 0.01


def make(config):
    warnings.simplefilter("ignore")
    if isinstance(config, str):
        from cosim.scenario import load_scenario
        return load_scenario(ROOT / "scenarios" / f"{config.split(':')[1]}.yaml").build()
    return cosim.Simulation(**config)


def stepped(config, n=5):
    sim = make(config)
    for _ in range(n):
        sim.do_step(sim.time, DT)
    return sim


# -- blob surgery (checksum recomputed: the fuzzer plays an attacker, not noise) -----------
def split(blob):
    start = len(serialization.MAGIC) + serialization._PREFIX.size
    _, n = serialization._PREFIX.unpack_from(blob, len(serialization.MAGIC))
    return blob[start:start + n], blob[start + n:-4]


def join(header_text, payload):
    body = b"".join([serialization.MAGIC, serialization._PREFIX.pack(serialization.VERSION,
                                                                      len(header_text)),
                     header_text, payload])
    return body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)


def with_data(blob, mutate):
    """Decode, let ``mutate(data)`` change the state tree, re-encode with the same meta."""
    meta, data = serialization.loads(blob)
    mutate(data)
    return serialization.dumps(data, meta)


def with_header(blob, mutate):
    """Let ``mutate(header_dict)`` change the raw JSON header (markers and all)."""
    text, payload = split(blob)
    header = json.loads(text)
    mutate(header)
    return join(json.dumps(header, separators=(",", ":")).encode(), payload)


def with_text(blob, old, new):
    text, payload = split(blob)
    assert old in text, old
    return join(text.replace(old, new, 1), payload)


def _set_piv(value):
    def mutate(d):
        nt = d["integrator"]["method_state"]["newton"]
        nt["piv"] = np.array(value(len(nt["piv"])), dtype=float if isinstance(value(2)[0], float)
                             else np.int32)
    return mutate


def _newton(key, fn):
    def mutate(d):
        nt = d["integrator"]["method_state"]["newton"]
        nt[key] = fn(nt[key])
    return mutate


def _setitem(path, value):
    def mutate(d):
        node = d
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value(node[path[-1]]) if callable(value) else value
    return mutate


def reproducers(label):
    """The issue's crafted blobs for one configuration: name -> blob-maker(blob)."""
    cases = {
        "fraction bomb": lambda b: with_header(b, lambda h: h["data"].__setitem__(
            "communication_steps", {"__fraction__": "1e100000000"})),
        "huge integer": lambda b: with_text(b, b'"communication_steps":5',
                                            b'"communication_steps":' + b"9" * 4000),
        "number 1e999": lambda b: with_text(b, b'"communication_steps":5', b'"communication_steps":1e999'),
        "deep nesting": lambda b: with_text(b, b'"communication_steps":5',
                                            b'"communication_steps":' + b"[" * 100000 + b"]" * 100000),
        "long string": lambda b: with_header(b, lambda h: h["data"]["integrator"].__setitem__(
            "method", "x" * 10 ** 6)),
        "time NaN": lambda b: with_data(b, lambda d: (d.__setitem__("time", math.nan),
                                                      d["integrator"].__setitem__("t", math.nan))),
        "integrator time NaN": lambda b: with_data(b, _setitem(("integrator", "t"), math.nan)),
        "time mismatch": lambda b: with_data(b, _setitem(("time",), lambda t: t + 1e-3)),
        "y NaN": lambda b: with_data(b, _setitem(("integrator", "y"), lambda y: y * np.nan)),
        "y wrong shape": lambda b: with_data(b, _setitem(("integrator", "y"), lambda y: y[:-1])),
        "params None": lambda b: with_data(b, _setitem(("params",), None)),
        "garbage event log": lambda b: with_data(b, _setitem(("event_log",), [{"time": "x"}, 3])),
        "event log bad kind": lambda b: with_data(b, _setitem(("event_log",), [
            {"time": 0.0, "name": "e", "kind": "bogus"}])),
        "negative statistics": lambda b: with_data(b, _setitem(("integrator", "stats", "steps"), -1)),
        "stopped without stop time": lambda b: with_data(b, _setitem(("stopped",), True)),
    }
    if label in NEWTON:
        cases.update({
            "pivots NaN": lambda b: with_data(b, _set_piv(lambda n: [math.nan] * n)),
            "pivots inf": lambda b: with_data(b, _set_piv(lambda n: [math.inf] * n)),
            "pivots 1e300": lambda b: with_data(b, _set_piv(lambda n: [1e300] * n)),
            "pivots out of range": lambda b: with_data(b, _set_piv(lambda n: [n] * n)),
            "pivots negative": lambda b: with_data(b, _set_piv(lambda n: [-1] * n)),
            "pivots below k": lambda b: with_data(b, _set_piv(lambda n: [0] * n)),
            "LU NaN": lambda b: with_data(b, _newton("lu", lambda a: a * np.nan)),
            "LU inf": lambda b: with_data(b, _newton("lu", lambda a: a + np.inf)),
            "LU wrong size": lambda b: with_data(b, _newton("lu", lambda a: a[:-1, :-1])),
        })
    if label.startswith("bdf"):
        cases.update({
            "BDF order 0": lambda b: with_data(b, _setitem(("integrator", "method_state", "k"), 0)),
            "BDF order 6": lambda b: with_data(b, _setitem(("integrator", "method_state", "k"), 6)),
            "BDF h_next 1e-300 at t>0": lambda b: with_data(
                b, _setitem(("integrator", "method_state", "h_next"), 1e-300)),
        })
    if label.endswith("/blocks"):
        cases["clock far behind"] = lambda b: with_data(b, _setitem(("clocks",), lambda c: [0] * len(c)))
    return cases


# -- one probe -------------------------------------------------------------------------------
class Hang(Exception):
    pass


def _alarm(*_):
    raise Hang()


def probe(sim, reference_bytes, blob, seconds=20):
    """Outcome of deserializing ``blob`` into ``sim`` (at the state ``reference_bytes``):
    "rejected" (StateError, unchanged), "accepted", or "FAIL: ..."."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        try:
            sim.deserialize_state(blob)
        except StateError as exc:
            if sim.serialize_state() != reference_bytes:
                return "FAIL: rejected but the state changed", str(exc)
            return "rejected", str(exc)
        except Hang:
            return "FAIL: deserialize_state hangs", ""
        except Exception as exc:  # noqa: BLE001 -- the point: nothing else may escape
            return f"FAIL: {type(exc).__name__} from deserialize_state", str(exc)[:200]
        # accepted: a step must work or fail cleanly with the state unchanged
        before = sim.serialize_state()
        try:
            sim.do_step(sim.time, DT)
        except Hang:
            return "FAIL: do_step hangs after an accepted blob", ""
        except CosimError as exc:
            if sim.serialize_state() != before:
                return "FAIL: failed step changed the state", str(exc)[:200]
            return "accepted (step failed cleanly)", str(exc)[:200]
        except Exception as exc:  # noqa: BLE001
            return f"FAIL: {type(exc).__name__} from do_step after an accepted blob", str(exc)[:200]
        return "accepted", ""
    finally:
        signal.alarm(0)


# -- random mutations ------------------------------------------------------------------------
HOSTILE = [math.nan, math.inf, -math.inf, 1e300, -1e300, 1e-300, 0.0, -1.0, -1, 0, 1, 2 ** 63,
           True, False, None, "", "x", [], {}, [1.0], {"a": 1}, 7.5]


def _leaves(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(node, (list, tuple)) and node:
        for i, v in enumerate(node):
            yield from _leaves(v, path + (i,))
    else:
        yield path, node


def _put(tree, path, value):
    node = tree
    for k in path[:-1]:
        node = node[k]
        if isinstance(node, tuple):
            raise TypeError("tuple")
    if isinstance(node, (dict, list)):
        node[path[-1]] = value


def mutate_random(blob, rng):
    kind = rng.integers(5)
    if kind == 0:  # raw byte flip, checksum not fixed
        b = bytearray(blob)
        b[rng.integers(len(b))] ^= 1 << int(rng.integers(8))
        return bytes(b), "bit flip"
    if kind == 1:  # header byte changed, checksum fixed
        text, payload = split(blob)
        t = bytearray(text)
        t[rng.integers(len(t))] = int(rng.integers(32, 127))
        return join(bytes(t), payload), "header byte (crc fixed)"
    if kind == 2:  # payload (array bytes) changed, checksum fixed
        text, payload = split(blob)
        if not payload:
            return blob, "no payload"
        p = bytearray(payload)
        for _ in range(int(rng.integers(1, 4))):
            p[rng.integers(len(p))] = int(rng.integers(256))
        return join(text, bytes(p)), "payload bytes (crc fixed)"
    meta, data = serialization.loads(blob)
    leaves = list(_leaves(data))
    path, value = leaves[rng.integers(len(leaves))]
    if kind == 3:
        if isinstance(value, np.ndarray) and value.size and rng.random() < 0.6:
            new = value.copy()
            flat = new.reshape(-1)
            flat[rng.integers(flat.size)] = rng.choice([np.nan, np.inf, -1, 1e300, 0, 10 ** 6]) \
                if new.dtype.kind == "f" else rng.integers(-3, 10 ** 6)
        elif isinstance(value, np.ndarray) and rng.random() < 0.5:
            new = value.reshape(-1)[:-1] if value.size else np.zeros(3)
        else:
            new = HOSTILE[rng.integers(len(HOSTILE))]
        try:
            _put(data, path, new)
        except (TypeError, KeyError, IndexError):
            return blob, "untouchable leaf"
        label = f"leaf {'.'.join(map(str, path))} <- {type(new).__name__}"
    else:  # drop or add a key in a random mapping
        node, nodes = data, []
        for k in path[:-1]:
            if isinstance(node, dict):
                nodes.append(node)
            node = node[k]
        if isinstance(node, dict):
            nodes.append(node)
        target = nodes[rng.integers(len(nodes))] if nodes else data
        if target and rng.random() < 0.5:
            key = list(target)[rng.integers(len(target))]
            del target[key]
            label = f"drop key {key}"
        else:
            target["extra"] = 1.0
            label = "add key"
    try:
        return serialization.dumps(data, meta), label
    except StateError:
        return blob, "unencodable"


def fuzz(seconds, seed, out=sys.stdout, cases=None):
    """``cases`` per configuration (None: as many as ``seconds`` allow), at most
    ``seconds`` of fuzzing."""
    rng = np.random.default_rng(seed)
    prepared = []
    for label, config in CONFIGS:
        sim = stepped(config)
        blob = sim.serialize_state()
        prepared.append((label, sim, blob))
    deadline = time.monotonic() + seconds
    tried, failures, step_failed = {}, [], []
    rounds = 0
    while time.monotonic() < deadline and (cases is None or rounds < cases):
        rounds += 1
        for label, sim, blob in prepared:
            bad, what = mutate_random(blob, rng)
            outcome, message = probe(sim, blob, bad)
            counts = tried.setdefault(label, {"tried": 0, "rejected": 0, "accepted": 0,
                                              "step failed": 0})
            counts["tried"] += 1
            counts["rejected" if outcome == "rejected" else "accepted"] += not outcome.startswith("FAIL")
            counts["step failed"] += outcome == "accepted (step failed cleanly)"
            if outcome == "accepted (step failed cleanly)":
                step_failed.append((label, what, message))
                print(f"accepted, then the next step failed: {label}: {what}: {message}", file=out,
                      flush=True)
            if outcome.startswith("FAIL"):
                failures.append((label, what, outcome, message))
                print(f"FAILURE {label}: {what}: {outcome}: {message}", file=out, flush=True)
            if not outcome == "rejected":
                sim.deserialize_state(blob)  # back to the reference state
            if time.monotonic() >= deadline:
                break
    total = sum(c["tried"] for c in tried.values())
    print(f"{'configuration':28s} {'tried':>7s} {'rejected':>9s} {'accepted':>9s} "
          f"{'(then the step failed)':>22s}", file=out)
    for label, c in tried.items():
        print(f"{label:28s} {c['tried']:7d} {c['rejected']:9d} {c['accepted']:9d} "
              f"{c['step failed']:22d}", file=out)
    if cases is not None and total < cases * len(prepared):
        print(f"stopped after {seconds:g} s of fuzzing: {total} of {cases * len(prepared)} cases "
              f"(a slow machine)", file=out)
    budget = f"{cases} cases per configuration" if cases is not None else f"{seconds:g} s"
    print(f"cases tried: {total}, failures: {len(failures)}, accepted then failed at the next "
          f"step: {len(step_failed)} (seed {seed}, {budget})", file=out)
    return total, failures


def run_reproducers():
    results = {}
    for label, config in CONFIGS:
        sim = stepped(config)
        blob = sim.serialize_state()
        for name, craft in reproducers(label).items():
            outcome, message = probe(sim, blob, craft(blob))
            continues = None
            if outcome == "rejected":  # the untouched simulation continues as a twin does
                twin = stepped(config)
                sim.do_step(sim.time, DT)
                twin.do_step(twin.time, DT)
                continues = sim.serialize_state() == twin.serialize_state()
                sim.deserialize_state(blob)
            else:
                sim.deserialize_state(blob)
            results[f"{label}: {name}"] = {"outcome": outcome, "message": message[:300],
                                           "continues": continues}
    return results


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cases", type=int, default=None,
                   help="cases per configuration (the same cases on every machine; no time limit)")
    p.add_argument("--short", action="store_true",
                   help="the CI mode: 100 cases per configuration, seed 14, at most 50 s")
    p.add_argument("--reproducers", action="store_true", help="print the crafted cases as JSON")
    args = p.parse_args(argv)
    if args.reproducers:
        print(json.dumps(run_reproducers()))
        return 0
    if args.short:
        print(f"fuzz_state --short: {len(CONFIGS)} configurations x 100 cases (seed 14); "
              f"preparing the simulations ...", flush=True)
        _, failures = fuzz(50.0, 14, cases=100)
    elif args.cases is not None:
        _, failures = fuzz(math.inf, args.seed, cases=args.cases)
    else:
        _, failures = fuzz(args.seconds, args.seed)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
