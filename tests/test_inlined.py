"""The functions numba inlines in each compiled method (cosim.jit.method_inlined).

A method's helpers named in a module's ``INLINED`` are inlined by numba into their
caller: a call of a function compiled on its own passes the work tuple member by
member.  Inlining is only cheap to compile when the helper has one caller; a second
caller would compile it twice.  Checked here, for every compiled method: each name is
a function of the module that lists it, called from at most one function of the
method (kernel_common's helpers are not used by every method), and it reaches the generated module's njit options.
"""
import ast
import importlib
import inspect

import pytest

from cosim import jit

METHOD_MODULES = ("generalized_alpha", "bdf", "explicit", "rkc", "local_index1", "symplectic", "block")


def _method_modules(name, monkeypatch):
    """The modules ``compiled_entry`` of integrator module ``name`` compiles (its
    helpers, then the kernel), captured without compiling."""
    seen = []

    def capture(method_module, method_name, helpers=(), estimate=None):
        seen.append((method_name, (*helpers, method_module)))
        return None
    monkeypatch.setattr(jit, "method_entry", capture)
    importlib.import_module(f"cosim.integrators.{name}").compiled_entry()
    assert len(seen) == 1
    return seen[0]


def _callers(modules):
    """name -> the set of functions (module.function) of ``modules`` that call it."""
    callers = {}
    for module in modules:
        tree = ast.parse(inspect.getsource(module))
        for fn in tree.body:
            if not isinstance(fn, ast.FunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    callers.setdefault(node.func.id, set()).add(f"{module.__name__}.{fn.name}")
    return callers


@pytest.mark.parametrize("name", METHOD_MODULES)
def test_every_inlined_helper_has_at_most_one_caller_in_its_method(name, monkeypatch):
    method, modules = _method_modules(name, monkeypatch)
    callers = _callers(modules)
    listed = 0
    for module in modules:
        for helper in getattr(module, "INLINED", ()):
            fn = getattr(module, helper, None)
            assert inspect.isfunction(fn) and fn.__module__ == module.__name__, \
                f"{module.__name__}.INLINED names {helper!r}, not one of its functions"
            assert len(callers.get(helper, ())) <= 1, \
                f"{method}: {helper} is called from {sorted(callers.get(helper, ()))}"
            listed += 1
    assert set(jit.method_inlined(modules)) >= set(jit.METHOD_INLINED)
    assert len(jit.method_inlined(modules)) <= len(jit.METHOD_INLINED) + listed


def test_the_compiled_method_inlines_exactly_the_listed_helpers(monkeypatch):
    pytest.importorskip("numba")
    with monkeypatch.context() as patch:
        _, modules = _method_modules("generalized_alpha", patch)
    inlined = set(jit.method_inlined(modules))
    assert {"_predict", "_accept", "snapshot_in", "entry", "advance", "step"} <= inlined
    from cosim.integrators.generalized_alpha import compiled_entry
    generated = inspect.getmodule(compiled_entry().py_func)
    options = {name: obj.targetoptions.get("inline") for name, obj in vars(generated).items()
               if hasattr(obj, "targetoptions") and hasattr(obj, "py_func")}
    assert {name for name, how in options.items() if how == "always"} == inlined
    assert options["_newton"] == "never" and options["_residual"] == "never"
