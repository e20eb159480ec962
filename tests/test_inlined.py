"""The functions numba inlines in each compiled method (cosim.jit.method_inlined).

A method's helpers named in a module's ``INLINED`` are inlined by numba into their
caller: a call of a function compiled on its own passes the work tuple member by
member.  Inlining is only cheap to compile when the helper has one caller; a second
caller would compile it twice.  Checked here, for every compiled method: each name is
a function of the module that lists it, called from at most one place in the method
(kernel_common's helpers are not used by every method; a few tiny ones from several
places of one function), and it reaches the generated module's njit options.
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


def _call_sites(modules):
    """name -> the functions (module.function) of ``modules`` that call it, once per call."""
    sites = {}
    for module in modules:
        tree = ast.parse(inspect.getsource(module))
        for fn in tree.body:
            if not isinstance(fn, ast.FunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    sites.setdefault(node.func.id, []).append(f"{module.__name__}.{fn.name}")
    return sites


# tiny helpers inlined at several call sites of their one calling function (a copy of a
# few instructions each): a view of the work buffer, a norm, the restart of entry's two modes
SEVERAL_SITES = {"_block", "_norm2", "restart", "_push_difference"}


@pytest.mark.parametrize("name", METHOD_MODULES)
def test_every_inlined_helper_has_at_most_one_call_site_in_its_method(name, monkeypatch):
    method, modules = _method_modules(name, monkeypatch)
    sites = _call_sites(modules)
    for module in modules:
        for helper in getattr(module, "INLINED", ()):
            fn = getattr(module, helper, None)
            assert inspect.isfunction(fn) and fn.__module__ == module.__name__, \
                f"{module.__name__}.INLINED names {helper!r}, not one of its functions"
            callers = sites.get(helper, [])
            # one call site (a second would compile the helper's code twice), or a tiny
            # helper's several sites in one calling function
            assert len(callers) <= 1 or (helper in SEVERAL_SITES and len(set(callers)) == 1), \
                f"{method}: {helper} is called from {callers}"


@pytest.mark.parametrize("name", METHOD_MODULES)
def test_the_compiled_method_inlines_exactly_the_listed_helpers(name, monkeypatch):
    pytest.importorskip("numba")
    with monkeypatch.context() as patch:
        _, modules = _method_modules(name, patch)
    inlined = set(jit.method_inlined(modules))
    generated = inspect.getmodule(importlib.import_module(f"cosim.integrators.{name}").compiled_entry().py_func)
    options = {fn: obj.targetoptions.get("inline") for fn, obj in vars(generated).items()
               if hasattr(obj, "targetoptions") and hasattr(obj, "py_func")}
    assert {fn for fn, how in options.items() if how == "always"} == inlined
    assert {"entry", "advance", "step"} <= inlined
    if name == "generalized_alpha":
        assert {"_predict", "_accept", "_solve"} <= inlined
        assert options["_newton"] == "never" and options["_residual"] == "never"
