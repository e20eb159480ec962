"""Arrays without reference counting in the compiled methods (kernel_common.unowned,
keep_alive; cosim.jit).

The compiled methods pass their arrays and their work arrays' views without an owner
(no NRT meminfo), so numba emits no atomic reference counting on them; an owned
reference keeps the memory alive (the caller's arguments; each advance()'s
``keep_alive(owned)``).  Checked here: the Python names are the identity and a no-op
(the python backend is unchanged), the compiled intrinsic removes the atomic
operations and reads the same numbers, every kernel keeps its owned work arrays
alive past the last use of a view of them, and many compiled calls — with rollbacks
— allocate and free the same number of blocks and repeat bit for bit.
"""
import ast
import inspect

import numpy as np
import pytest

import cosim
from cosim.integrators import (bdf_kernel, block_kernel, explicit_kernel, ga_kernel, kernel_common,
                               li1_kernel, rkc_kernel, spark_kernel)
from cosim.integrators.generalized_alpha import compiled_entry

numba = pytest.importorskip("numba")

KERNELS = (bdf_kernel, block_kernel, explicit_kernel, ga_kernel, li1_kernel, rkc_kernel, spark_kernel)


def test_unowned_is_the_identity_and_keep_alive_nothing_in_python():
    a, b = np.arange(3.0), np.zeros((2, 2))
    pair = (a, b)
    assert kernel_common.unowned(pair) is pair and kernel_common.unowned(a) is a
    assert kernel_common.keep_alive(pair) is None


def _generated():
    """The generated generalized-α module (its intrinsics)."""
    return compiled_entry().py_func.__globals__


def _has_owner():
    """numba intrinsic: whether an array carries an NRT meminfo (what numba counts
    references on; its NRT_incref/NRT_decref return at once on a null one)."""
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def has_owner(typingctx, array):
        def codegen(context, builder, signature, args):
            meminfo = context.make_array(signature.args[0])(context, builder, args[0]).meminfo
            return cgutils.is_not_null(builder, meminfo)
        return types.boolean(array), codegen
    return has_owner


def test_compiled_unowned_views_carry_no_owner_and_read_the_same_numbers():
    g = _generated()
    assert g["unowned"] is g["_unowned"] and g["keep_alive"] is g["_keep_alive"]
    unowned, keep_alive, has_owner = g["_unowned"], g["_keep_alive"], _has_owner()

    @numba.njit
    def use(n):
        buf = np.arange(float(n))
        owned = (buf[: n // 2], buf[n // 2:].reshape((1, n - n // 2)))
        views = unowned(owned)
        acc = 0.0
        for k in range(n // 2):
            a, b = views
            acc += a[k:][0] * b[0, k:][0]
        a, b = views
        owners = (has_owner(buf), has_owner(owned[0]), has_owner(a), has_owner(a[1:]),
                  has_owner(b[0, 1:]), has_owner(unowned(buf)))
        keep_alive(owned)
        return acc, owners

    n = 1000
    acc, owners = use(n)
    assert acc == float(np.arange(n // 2.0) @ np.arange(n // 2.0, n))
    assert owners == (True, True, False, False, False, False)   # views of views too


def _aliases(fn):
    """(owned name, names that may hold a view of it, statements after keep_alive(owned))
    of a kernel function that calls ``unowned``: its dataflow by assignment."""
    tree = ast.parse(inspect.getsource(fn)).body[0]
    body = tree.body
    owned, start = None, None
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) \
                and getattr(stmt.value.func, "id", None) == "unowned":
            owned, start = stmt.value.args[0].id, i
            break
    assigns = [node for node in ast.walk(ast.Module(body=body[start:], type_ignores=[]))
               if isinstance(node, ast.Assign)]
    views, grown = {owned}, True
    while grown:                       # names assigned from a view, transitively
        grown = False
        for node in assigns:
            if {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)} & views:
                targets = {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                grown, views = grown or not targets <= views, views | targets
    keep = [i for i, stmt in enumerate(body)
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and getattr(stmt.value.func, "id", None) == "keep_alive"
            and [a.id for a in stmt.value.args] == [owned]]
    return owned, views, keep, body


def test_every_kernel_keeps_its_owned_work_arrays_alive_past_their_last_view():
    checked = []
    for module in KERNELS:
        for name, fn in vars(module).items():
            if not inspect.isfunction(fn) or fn.__module__ != module.__name__:
                continue
            source = inspect.getsource(fn)
            if "workspace(" in source and name in ("advance", "complete_step"):
                assert "unowned(" in source, f"{module.__name__}.{name}"
            if "unowned(" not in source:
                continue
            owned, views, keep, body = _aliases(fn)
            assert len(keep) == 1, f"{module.__name__}.{name}: one keep_alive({owned}) at its top level"
            after = {n.id for stmt in body[keep[0] + 1:] for n in ast.walk(stmt) if isinstance(n, ast.Name)}
            # only the status and plain numbers after it: no view of the work arrays
            assert not (after & (views - {"status"})), f"{module.__name__}.{name}: {after & views}"
            checked.append(f"{module.__name__.rsplit('.', 1)[-1]}.{name}")
    assert len(checked) == len(KERNELS) + 1   # every advance, and explicit's complete_step


def test_many_compiled_steps_free_every_block_and_repeat_bit_for_bit():
    from numba.core.runtime import _nrt_python, rtsys
    sim = cosim.Simulation(model="two_link", method="generalized-alpha", h=1e-3, backend="numba")
    sim.do_step(sim.time, 1e-3)                    # compiled and warmed
    snap = sim.get_state()
    enabled = _nrt_python.memsys_stats_enabled()
    _nrt_python.memsys_enable_stats()
    try:
        before = rtsys.get_allocation_stats()
        for k in range(3000):
            sim.set_inputs([0.5 * np.cos(0.02 * k), -0.3])
            sim.do_step(sim.time, 1e-3)
        after = rtsys.get_allocation_stats()
    finally:
        if not enabled:
            _nrt_python.memsys_disable_stats()
    allocated = after.alloc - before.alloc
    assert allocated >= 3000                                   # a workspace per call at least
    assert after.free - before.free == allocated               # every one freed
    assert after.mi_free - before.mi_free == after.mi_alloc - before.mi_alloc
    y1, stats1 = sim.y, dict(sim.stats)
    sim.set_state(snap)                                        # rollback, the same run again
    for k in range(3000):
        sim.set_inputs([0.5 * np.cos(0.02 * k), -0.3])
        sim.do_step(sim.time, 1e-3)
    assert np.array_equal(sim.y, y1) and dict(sim.stats) == stats1
    assert sim.stats["steps"] >= 3001 and np.all(np.isfinite(y1))
