"""A compiled function loaded from numba's disk cache without setting up numba's
compiler (cosim.jit._loads_without_compiler): the loaded code gives the numbers the
compiled code gave, a miss still compiles, and an entry that needs more of numba (the
string hash secret) takes numba's own path.  Each case runs in fresh processes: the
first compiles and fills the cache, the second loads."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KERNELS = '''
import numpy as np


def scaled_copy(x, a):
    out = np.empty_like(x)          # an allocation: the NRT the light load initialises
    for i in range(x.size):
        out[i] = a * x[i] + 0.1 * i
    return out


def keyed(x):
    d = {"first": x, "second": 2.0 * x}   # string keys: hashed with the hash secret
    return d["second"] - d["first"]
'''

CHILD = '''
import json, sys
import numpy as np
from cosim import jit
import light_kernels as k

f = jit.njit(k.scaled_copy)
out = f(np.arange(5.0), 3.0)
after_f = "numba.np.arraymath" in sys.modules        # numba's compiler was set up
g = jit.njit(error_model="numpy")(k.keyed)
y = g(1.25)
after_g = "numba.np.arraymath" in sys.modules
print(json.dumps({"out": out.tolist(), "y": y, "compiler_after_f": after_f, "compiler_after_g": after_g,
                  "hits_f": sum(f.stats.cache_hits.values()),
                  "hits_g": sum(g.stats.cache_hits.values())}))
'''


def _run(folder):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = os.pathsep.join([str(folder), REPO])
    proc = subprocess.run([sys.executable, "-c", CHILD], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_cache_hit_loads_without_the_compiler_and_gives_the_compiled_numbers(tmp_path):
    (tmp_path / "light_kernels.py").write_text(textwrap.dedent(KERNELS))
    first = _run(tmp_path)     # compiles both (a miss after the light loader is attached)
    second = _run(tmp_path)    # loads both from the cache
    expected = [3.0 * i + 0.1 * i for i in range(5)]
    assert first["hits_f"] == first["hits_g"] == 0
    assert first["compiler_after_f"] is True
    assert second["hits_f"] == second["hits_g"] == 1
    # the light load: the cached function ran without numba's typing/lowering set-up
    assert second["compiler_after_f"] is False
    # the entry that reads the hash secret was loaded the way numba loads it
    assert second["compiler_after_g"] is True
    for run in (first, second):
        assert run["out"] == pytest.approx(expected, rel=0, abs=1e-15)
        assert run["y"] == 1.25
    assert second["out"] == first["out"]   # bit-identical: the same machine code


def _cosim_modules():
    """Every module of cosim, cosim.integrators and cosim.models (but optional extras)."""
    import importlib
    import pkgutil
    for package in ("cosim", "cosim.integrators", "cosim.models"):
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
            if info.name == "__main__":
                continue
            try:
                yield importlib.import_module(f"{package}.{info.name}")
            except ImportError:   # an optional extra
                continue


def test_relative_imports_scanned_as_the_syntax_tree_finds_them():
    """The generated method modules drop the pasted modules' relative imports; the line
    scanner that finds them (no parse on a warm start) gives the syntax tree's lines on
    every module of cosim (so every generated module, and its cache entry, is unchanged),
    and defers to the tree where such a line may be inside a string."""
    from cosim import jit
    checked = 0
    for module in _cosim_modules():
        source = jit._safe_source(module)
        assert jit._relative_import_lines_scanned(source.splitlines()) == \
            jit._relative_import_lines(source), module.__name__
        checked += 1
    assert checked > 80
    text = ('"""doc\nfrom .x import y\n"""\nfrom .a import (b,  # (c\n    d)\nfrom .e import \\\n  f\n'
            'x = 1\n')
    assert jit._relative_import_lines_scanned(text.splitlines()) is None
    body = text.split('"""\n', 2)[-1]
    assert jit._relative_import_lines_scanned(body.splitlines()) == jit._relative_import_lines(body) \
        == {1, 2, 3, 4}


def test_function_source_without_tokenising_is_inspects_text(tmp_path):
    """The pasted kernels' text (and with it every generated module and its cache
    entry) read by instruction positions instead of inspect's tokeniser: the same
    text as ``inspect.getsource`` for every module-level function of cosim, and for
    the shapes a user's kernel file may take (decorators, a trailing ``pass``, a
    closing bracket alone on its line, comments and blank lines after the body)."""
    import importlib
    import inspect
    import types

    from cosim import jit
    checked = 0
    for module in _cosim_modules():
        for fn in vars(module).values():
            fn = getattr(fn, "py_func", fn)
            if isinstance(fn, types.FunctionType) and fn.__module__ == module.__name__:
                text = jit._module_level_source(fn)
                if text is not None:
                    assert text == inspect.getsource(fn), fn.__qualname__
                    checked += 1
    assert checked > 500
    shapes = textwrap.dedent('''
        import numba


        @numba.njit(
            cache=False)
        def decorated(x):
            return (x +
                    1.0
                    )


        def empty_loop(n):
            for i in range(n):
                pass
            else:
                pass
            # a trailing comment in the body

        # a comment at column 0
        def docstring_only():
            """Only
        a docstring."""


        def nested(x):
            def inner(y):
                return [y,
                        2]
            return inner(x)
        X = 1
        ''')
    (tmp_path / "source_shapes.py").write_text(shapes)
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("source_shapes")
    finally:
        sys.path.remove(str(tmp_path))
    for name in ("empty_loop", "docstring_only", "nested"):
        fn = getattr(module, name)
        assert jit._function_source(fn) == inspect.getsource(fn), name
    fn = module.decorated.py_func
    assert jit._module_level_source(fn) == inspect.getsource(fn)
    assert jit._module_level_source(module.empty_loop) == inspect.getsource(module.empty_loop)
    # the docstring runs on at column 0 past the last instruction: inspect decides
    assert jit._module_level_source(module.docstring_only) is None


LAZY_CHILD = '''
import json, sys
import numba
import cosim
from cosim import jit
if sys.argv[1] == "eager":     # numba's own load of the method's entry
    loads = jit._loads_without_compiler
    jit._loads_without_compiler = lambda d, lazy_linking=False: loads(d)
sim = cosim.Simulation(model="andrews", method="bdf")
ig = sim.integrator
entry = ig._entry
library = entry.overloads[next(iter(entry.overloads))].library
unparsed = library._shared_module is None
K = ig._kernel

def args():
    return (ig._fns, K.WHOLE_INTERVAL, ig._S.copy(), ig._I.copy(), ig._LU.copy(), ig._u_c,
            ig._parameters(), 0.002, 100000, ig._y_out.copy())

direct = args()
status = entry(*direct)
linked = None
if sys.argv[1] == "lazy":      # a new function calling the entry: links its bitcode
    caller = numba.njit(lambda *a: entry(*a))
    again = args()
    linked = [int(caller(*again)), again[2].tobytes().hex()]
sim.do_step(0.0, 0.01)
print(json.dumps({"unparsed": unparsed, "status": int(status), "S": direct[2].tobytes().hex(),
                  "linked": linked, "y": sim.y.tobytes().hex()}))
'''


def test_method_entry_bitcode_parsed_only_when_linked(tmp_path):
    """A method's entry loads without parsing its bitcode (kept for linking): the
    numbers are those of numba's own load bit for bit, and a new function calling the
    entry (which links that bitcode) compiles and gives them too."""
    env = dict(os.environ, PYTHONPATH=REPO)

    def child(mode):
        proc = subprocess.run([sys.executable, "-c", LAZY_CHILD, mode], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    lazy, eager = child("lazy"), child("eager")
    assert lazy["unparsed"] and not eager["unparsed"]
    assert lazy["status"] == eager["status"] == 0
    assert lazy["S"] == eager["S"] and lazy["y"] == eager["y"]
    assert lazy["linked"] == [0, eager["S"]]
