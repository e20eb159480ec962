"""A method's state declared once (cosim.integrators.state_decl): the record module's
layout is the generated one, the state dictionary and its schema come from the same
declaration, and blobs written before the declaration existed still restore."""
import inspect
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim.errors import StateError
from cosim.integrators.state_decl import declarations

DATA = Path(__file__).resolve().parent / "data"
# blobs written by cosim 732963e (hand-written state dictionary), after 3 steps of 0.01
OLD_BLOBS = [("state_dopri5_pendulum.blob", "pendulum", "dopri5", {}),
             ("state_rk4_knife_edge.blob", "knife_edge", "rk4", {}),
             ("state_rk4_h_lti.blob", "lti", "rk4", {"h": 1e-3}),
             ("state_ga_two_link.blob", "two_link", "generalized-alpha", {}),
             ("state_ga_i2_knife_edge.blob", "knife_edge", "generalized-alpha-i2", {}),
             # written by cosim 730669d (hand-written state dictionary), the same way
             ("state_li1_knife_edge.blob", "knife_edge", "local-index1", {}),
             ("state_li1_gauss_newton_two_link.blob", "two_link", "local-index1",
              {"method_options": {"nullspace": "gauss", "iteration": "newton"}}),
             ("state_spark_two_link.blob", "two_link", "spark", {"method_options": {"stages": 2}}),
             ("state_block_two_link.blob", "two_link", "block-lstable", {"method_options": {"error_estimate": True}}),
             ("state_rkc_pendulum.blob", "pendulum", "rkc-penalty", {}),
             ("state_rkc_bayo_knife_edge.blob", "knife_edge", "rkc-penalty", {"method_options": {"formulation": "bayo"}})]


@pytest.mark.parametrize("decl, filename", declarations(), ids=lambda x: getattr(x, "module", ""))
def test_record_module_layout_is_what_the_declaration_generates(decl, filename):
    """Regenerate with ``python cosim/integrators/state_decl.py`` after editing a declaration."""
    text = Path(filename).read_text(encoding="utf-8")
    assert decl.layout_in_module(text) == decl.layout_source()


@pytest.mark.parametrize("record, kernel", [("explicit_record", "explicit_kernel"), ("ga_record", "ga_kernel"),
                                            ("bdf_record", "bdf_kernel"), ("li1_record", "li1_kernel"),
                                            ("spark_record", "spark_kernel"), ("block_record", "block_kernel"),
                                            ("rkc_record", "rkc_kernel")])
def test_generated_constants_are_the_kernel_record_slots(record, kernel):
    """The slots as the kernel sees them (the record module imported) and the offsets
    of a nonholonomic model agree with the declaration, each picked by its generated
    name (O_Y … O_END; rkc_offsets': RKC_O_Y …)."""
    import importlib
    R = importlib.import_module(f"cosim.integrators.{record}")
    K = importlib.import_module(f"cosim.integrators.{kernel}")
    decl = next(d for d, f in declarations() if Path(f).name == f"{record}.py")
    for name, value in {**decl.constants, **decl.slots}.items():
        assert getattr(R, name) == value == getattr(K, name, value), name
    sizes = {"n": 3, "m": 2, "ny": 6, "mz": 3, "ggl": 1, "ng": 1, "ns": 5, "g": 1, "s": 2, "nv": 2, "nb": 2, "r": 3}
    starts = decl.s_offsets(sizes)
    offsets = getattr(R, decl.names["offsets"])
    args = [sizes[a.strip()] for a in inspect.signature(offsets).parameters]
    assert offsets(*args) == tuple(o for o, _ in starts.values()) + (
        sum(length for _, length in starts.values()) + getattr(R, decl.names["N_SCALARS"]),)
    prefix = "RKC_O_" if record == "rkc_record" else "O_"
    for name, (start, length) in starts.items():
        position = getattr(R, prefix + name.upper())
        assert offsets(*args)[position] == start and getattr(K, prefix + name.upper(), position) == position
    assert offsets(*args)[getattr(R, prefix + "END")] == start + length


@pytest.mark.parametrize("ggl", [0, 1])
@pytest.mark.parametrize("ng", [0, 2])
def test_generalized_alpha_keeps_one_pivot_per_newton_unknown(ggl, ng):
    from cosim.integrators import explicit_record, ga_record
    n, m = 5, 3
    assert ga_record.int_length(n, m, ggl, ng) == ga_record.PIV + ga_record.matrix_size(n, m, ggl, ng)
    assert explicit_record.int_length(n, m) == explicit_record.PIV + n + m


def _leaves(state, path=""):
    """The leaves of a state dictionary by path."""
    if isinstance(state, dict):
        for k, v in state.items():
            yield from _leaves(v, f"{path}/{k}")
    elif isinstance(state, (list, tuple)):
        for i, v in enumerate(state):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, state


def _scaled_difference(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        return np.inf
    if np.array_equal(a, b, equal_nan=True):
        return 0.0
    scale = max(np.max(np.abs(a), initial=0.0), np.max(np.abs(b), initial=0.0))
    return float(np.max(np.abs(a - b), initial=0.0)) / scale


# the point of the run a blob carries (its algorithm memory is judged by the step after)
_POINT = ("/time", "/integrator/t", "/integrator/y", "/integrator/t_prev", "/integrator/y_prev",
          "/integrator/qdd", "/integrator/lam")


def _assert_within_the_roundoff_spread(other, here, perturbed):
    """A state written on another CPU (whose compiled arithmetic may round differently)
    against this machine's run of the same steps: the point within 10 × the spread of
    runs from starts perturbed by 1e-15 (max |Δ| over the array's largest entry; the
    spread measured here, in the test), the statistics equal where the perturbed runs
    keep them."""
    mine = dict(_leaves(here))
    perts = [dict(_leaves(p)) for p in perturbed]
    for path, value in _leaves(other):
        if path in _POINT:
            spread = max(_scaled_difference(p[path], mine[path]) for p in perts)
            assert _scaled_difference(value, mine[path]) <= 10.0 * spread + 1e-14, path
        elif path.startswith("/integrator/stats") and all(p[path] == mine[path] for p in perts):
            assert value == mine[path], path


def _perturbed_twin(model, method, kw, steps, dt, seed):
    from cosim.models import load_model
    plant = load_model(model)
    y0 = plant.initial_y() * (1.0 + 1e-15 * np.random.default_rng(seed).standard_normal(plant.n_y))
    plant.initial_y = lambda: y0.copy()
    twin = cosim.Simulation(plant, method, **kw)
    for _ in range(steps):
        twin.do_step(twin.time, dt)
    return twin


def _twin_continues(blob, sim, twin, model, method, kw, steps, dt):
    """``twin`` (``steps`` of ``dt`` from the start) is the run that wrote ``blob`` and
    ``sim`` was restored from it: on a CPU that rounds as the writer's did, twin
    serializes to the blob and the two continue bit-identically; elsewhere both
    agree with the blob's run within the roundoff spread."""
    if twin.serialize_state() == blob:
        sim.do_step(sim.time, dt)
        twin.do_step(twin.time, dt)
        assert sim.serialize_state() == twin.serialize_state()
        return True
    perturbed = [_perturbed_twin(model, method, kw, steps, dt, seed) for seed in range(3)]
    _assert_within_the_roundoff_spread(sim.get_state(), twin.get_state(), [p.get_state() for p in perturbed])
    for s in (sim, twin, *perturbed):
        s.do_step(s.time, dt)
    _assert_within_the_roundoff_spread(sim.get_state(), twin.get_state(), [p.get_state() for p in perturbed])
    return False


@pytest.mark.parametrize("blob_name, model, method, kw", OLD_BLOBS)
def test_blob_written_before_the_declaration_restores_byte_for_byte_and_continues(blob_name, model, method, kw):
    warnings.simplefilter("ignore")
    blob = (DATA / blob_name).read_bytes()
    sim = cosim.Simulation(model, method, **kw)
    sim.deserialize_state(blob)
    assert sim.serialize_state() == blob
    twin = cosim.Simulation(model, method, **kw)   # the run that wrote the blob
    for _ in range(3):
        twin.do_step(twin.time, 0.01)
    _twin_continues(blob, sim, twin, model, method, kw, 3, 0.01)


@pytest.mark.parametrize("model", ["pendulum", "lti"])
@pytest.mark.parametrize("method", ["dopri5", "rk4"])
def test_state_dictionary_has_the_declared_keys(model, method):
    sim = cosim.Simulation(model, method)
    sim.do_step(0.0, 0.01)
    s = sim.integrator.state()
    assert list(s) == ["method", "t", "y", "t_prev", "y_prev", "u", "stats", "method_state", "qdd", "lam"]
    assert list(s["method_state"]) == ["h_next", "f_cur", "dense", "projection_iterations"]
    assert list(s["method_state"]["dense"]) == (["Q", "h", "shift"] if method == "dopri5" else ["f0", "f1", "h"])
    ny = sim.model.n_y
    assert s["method_state"]["dense"]["h"].shape == () and s["method_state"]["f_cur"].shape == (ny,)
    assert s["t"] == sim.integrator._S[0] and s["method_state"]["h_next"] == sim.integrator.h_next


@pytest.mark.parametrize("method", ["generalized-alpha", "generalized-alpha-i2"])
@pytest.mark.parametrize("backend", ["python", "numba"])
def test_generalized_alpha_state_dictionary_has_the_declared_keys(method, backend):
    sim = cosim.Simulation("two_link", method, backend=backend)
    sim.do_step(0.0, 0.01)
    s = sim.integrator.state()
    assert list(s) == ["method", "t", "y", "t_prev", "y_prev", "u", "stats", "method_state", "qdd", "lam"]
    assert list(s["method_state"]) == ["a", "qdd_prev", "h_next", "h_last", "x_rate", "lam_rate", "newton"]
    assert list(s["method_state"]["newton"]) == ["sigma", "h_jac", "lu", "piv", "need_jac", "relax"]
    n, m = sim.model.n_q, sim.model.n_c
    N = n + m if method == "generalized-alpha" else 2 * (n + m)
    assert s["method_state"]["newton"]["lu"].shape == (N, N) and s["method_state"]["newton"]["piv"].dtype == np.int32
    assert s["method_state"]["lam_rate"].shape == (m,) and s["method_state"]["h_last"] > 0.0


@pytest.mark.parametrize("backend", ["python", "numba"])
def test_local_index1_state_dictionary_has_the_declared_keys(backend):
    sim = cosim.Simulation("knife_edge", "local-index1", backend=backend)
    assert sim.integrator.state()["method_state"]["dense"] is None   # before a step
    sim.do_step(0.0, 0.01)
    s = sim.integrator.state()
    assert list(s) == ["method", "t", "y", "t_prev", "y_prev", "u", "stats", "method_state", "qdd", "lam"]
    assert list(s["method_state"]) == ["h_next", "dense", "newton"]
    assert list(s["method_state"]["dense"]) == ["g0", "g1"]
    n, mg = sim.model.n_q, sim.model.n_c + 1   # knife_edge: one nonholonomic row
    assert s["method_state"]["newton"]["lu"].shape == (2 * n, 2 * n) and s["lam"].shape == (mg,)
    assert np.array_equal(s["method_state"]["dense"]["g1"], np.concatenate([sim.integrator.v, s["qdd"]]))


@pytest.mark.parametrize("backend", ["python", "numba"])
def test_spark_state_dictionary_has_the_declared_keys(backend):
    sim = cosim.Simulation("two_link", "spark", backend=backend, h=0.01, method_options={"stages": 2})
    sim.do_step(0.0, 0.01)
    s = sim.integrator.state()
    assert list(s) == ["method", "t", "y", "t_prev", "y_prev", "u", "stats", "method_state", "qdd", "lam"]
    assert list(s["method_state"]) == ["h", "gamma", "h_last", "qdd_prev", "newton"]
    n, m = sim.model.n_q, sim.model.n_c
    N = sim.integrator.c.size * n + 2 * m   # nv stage velocities and s = 2 impulses
    assert s["method_state"]["newton"]["lu"].shape == (N, N) and s["method_state"]["qdd_prev"].shape == (n,)
    assert s["method_state"]["h"] == sim.integrator.h == 0.01 and s["method_state"]["h_last"] == 0.01


@pytest.mark.parametrize("backend", ["python", "numba"])
def test_block_state_dictionary_has_the_declared_keys(backend):
    sim = cosim.Simulation("two_link", "block-lstable", backend=backend, h=0.01, method_options={"r": 3})
    sim.do_step(0.0, 0.01)
    s = sim.integrator.state()
    assert list(s) == ["method", "t", "y", "t_prev", "y_prev", "u", "stats", "method_state", "qdd", "lam"]
    assert list(s["method_state"]) == ["h", "h_last", "stage_q", "stage_v", "stage_t0", "error_estimate", "newton"]
    n, m = sim.model.n_q, sim.model.n_c
    assert s["method_state"]["newton"]["lu"].shape == (3 * (n + m),) * 2 and s["method_state"]["stage_q"].shape == (3, n)
    assert np.array_equal(s["method_state"]["stage_q"][-1], sim.integrator.q)   # c_r = 1: the last stage is the step's end
    assert s["method_state"]["h"] == s["method_state"]["h_last"] == 0.01 and s["method_state"]["stage_t0"] == 0.0
    sim.integrator.restart()
    assert sim.integrator.state()["method_state"]["stage_t0"] is None


def test_rkc_penalty_record_shares_the_slots_of_the_index1_form():
    """The index-1 form (index1_kernel) is pasted into both compiled methods: the slots
    it reads are at the same places in both records (rkc_record's layout leaves them
    out: they are explicit_record's), and it reads neither record's own names (the
    pivots' start is its argument)."""
    from cosim import jit
    from cosim.integrators import index1_kernel
    from cosim.integrators.explicit_state import RECORD as explicit
    from cosim.integrators.rkc_state import RECORD as rkc
    shared = set(explicit.slots) & set(rkc.slots)
    assert rkc._inherited == shared and all(explicit.slots[k] == rkc.slots[k] for k in shared)
    own = (set(explicit.slots) ^ set(rkc.slots)) | {*explicit.names.values(), *rkc.names.values()}
    used = set().union(*(jit._global_names(f.__code__) for f in vars(index1_kernel).values()
                         if inspect.isfunction(f) and f.__module__ == index1_kernel.__name__))
    assert {"F_CT", "HAS_F", "ST_LU"} <= used and not used & own, used & own


@pytest.mark.parametrize("backend", ["python", "numba"])
def test_rkc_penalty_state_dictionary_has_the_declared_keys(backend):
    sim = cosim.Simulation("knife_edge", "rkc-penalty", backend=backend)
    sim.do_step(0.0, 0.01)
    s = sim.integrator.state()
    assert list(s) == ["method", "t", "y", "t_prev", "y_prev", "u", "stats", "method_state", "qdd", "lam"]
    assert list(s["method_state"]) == ["h_next", "f_cur", "dense", "rho", "eigvec", "steps_since_rho", "penalty",
                                       "alpha", "h_last", "err_last", "last_stages", "max_stages_used"]
    assert list(s["method_state"]["dense"]) == ["f0", "f1", "h"] and s["method_state"]["alpha"] == -1.0
    ny = sim.model.n_y
    assert s["method_state"]["eigvec"].shape == s["method_state"]["dense"]["f1"].shape == (ny,)
    assert np.array_equal(s["method_state"]["dense"]["f1"], s["method_state"]["f_cur"])
    assert s["method_state"]["max_stages_used"] >= s["method_state"]["last_stages"] >= 2


_GA_BAD = [
    (lambda d: d.__setitem__("h_last", -2.0), "method_state.h_last: must be >= 0 (or -1: none)"),
    (lambda d: d.__setitem__("h_next", 0.0), "method_state.h_next: must be > 0"),
    (lambda d: d.__setitem__("a", np.zeros(99)), "method_state.a: must have shape"),
    (lambda d: d.__setitem__("lam_rate", np.full(d["lam_rate"].shape, np.nan)), "method_state.lam_rate[0]"),
    (lambda d: d["newton"].__setitem__("sigma", -1.0), "method_state.newton.sigma: must be >= 0"),
    (lambda d: d["newton"]["piv"].__setitem__(0, 10 ** 6), "method_state.newton.piv[0]"),
    (lambda d: d["newton"].pop("piv"), "method_state.newton: must hold both lu and piv"),
    (lambda d: d["newton"].__setitem__("relax", 3.0), "method_state.newton.relax: must be in (0, 2]"),
    (lambda d: d.__setitem__("h_last", 1e-300), "method_state.h_last: step size 1e-300 does not advance"),
    # a kept factor is one of partial pivoting (multipliers at most 1) that passed the singularity test
    (lambda d: d["newton"]["lu"].__setitem__((3, 1), -1.6e43),
     "method_state.newton.lu[3, 1]: an LU multiplier of partial pivoting is at most 1 in size, got -1.6e+43"),
    # (the last pivot: a tiny first pivot is a tiny first column of the matrix, which the
    # scale-free re-judgement reads as a change of units, as factor_matrix does)
    (lambda d: d["newton"]["lu"].__setitem__((-1, -1), 1.5e-29),
     "method_state.newton.lu: LU factor is numerically singular: pivots min/max"),
]


# two_link (n = 6, m = 4) after a step: orders 1..5, a kept LU and its J
_BDF_BAD = [
    (lambda d: d.__setitem__("k", 6), "method_state.k: must be in 1..5, got 6"),
    (lambda d: d.__setitem__("order", 0), "method_state.order: must be in 1..5, got 0"),
    (lambda d: d.__setitem__("valid", 8), "method_state.valid: must be in 1..7, got 8"),
    (lambda d: d.__setitem__("k_used", 2.0), "method_state.k_used: must be an integer"),
    (lambda d: d.__setitem__("n_steps", -1), "method_state.n_steps: must be in 0.."),
    (lambda d: d.__setitem__("h", 0.0), "method_state.h: must be > 0"),
    (lambda d: d.__setitem__("order_counts", [1, 2]), "method_state.order_counts: must be a list of 6, got list of 2"),
    (lambda d: d.__setitem__("order_counts", np.zeros(6, dtype=int)), "method_state.order_counts: must be a list of 6"),
    (lambda d: d["order_counts"].__setitem__(3, -1), "method_state.order_counts[3]: must be in 0.."),
    (lambda d: d["tau"].__setitem__(1, 0.0), "method_state.tau: must start with 2 positive step sums"),
    (lambda d: d.__setitem__("D", d["D"].reshape(-1)), "method_state.D: must have shape (8, 12)"),
    (lambda d: d.__setitem__("Dz", d["Dz"][:, :-1]), "method_state.Dz: must have shape (8, 10)"),
    (lambda d: d["Dz"].__setitem__((7, 0), np.nan), "method_state.Dz[7, 0]: must be finite"),
    (lambda d: d.__setitem__("J", np.eye(3)), "method_state.J: must have shape (10, 10)"),
    (lambda d: [d["newton"].pop(k) for k in ("lu", "piv", "need_jac", "relax")],
     "method_state.J: is stored without its LU factorisation"),
    (lambda d: d["newton"]["piv"].__setitem__(0, -1), "method_state.newton.piv[0]"),
    (lambda d: d.pop("valid"), "method_state: lacks ['valid']"),
    # the kept LU is J's factorisation: an entry of U, or of J, changed alone
    (lambda d: d["newton"]["lu"].__setitem__((1, 2), 2.8e14), "the kept LU factors a matrix whose entry is"),
    (lambda d: d["newton"]["lu"].__setitem__((0, 9), d["newton"]["lu"][0, 9] + 1e-3),
     "the kept LU factors a matrix whose entry is"),
    (lambda d: d["J"].__setitem__((4, 4), d["J"][4, 4] * (1 + 1e-9)), "the kept LU factors a matrix whose entry is"),
]


_LI1_BAD = [
    (lambda d: d.__setitem__("h_next", 0.0), "method_state.h_next: must be > 0"),
    (lambda d: d["dense"].__setitem__("g0", np.zeros(2)), "method_state.dense.g0: must have shape (6,)"),
    (lambda d: d["dense"].pop("g1"), "method_state.dense: lacks ['g1']"),
    (lambda d: d["dense"]["g1"].__setitem__(0, np.nan), "method_state.dense.g1[0]: must be finite"),
    (lambda d: d["newton"]["piv"].__setitem__(0, 10 ** 6), "method_state.newton.piv[0]"),
    (lambda d: d["newton"]["lu"].__setitem__((0, 0), 0.0), "method_state.newton.lu[0, 0]"),
]


_SPARK_BAD = [
    (lambda d: d.__setitem__("h", 0.0), "method_state.h: must be > 0"),
    (lambda d: d.__setitem__("h_last", -2.0), "method_state.h_last: must be >= 0 (or -1: none)"),
    (lambda d: d.__setitem__("gamma", np.nan), "method_state.gamma: must be finite"),
    (lambda d: d.__setitem__("gamma", 2 ** 63), "method_state.gamma: must be at most 1e+12 in size, got 9.223372036854776e+18"),
    (lambda d: d.__setitem__("qdd_prev", np.zeros(9)), "method_state.qdd_prev: must have shape"),
    (lambda d: d["newton"].__setitem__("sigma", -1.0), "method_state.newton.sigma: must be >= 0"),
]


# two_link (n = 6, m = 4), r = 4 nodes
_BLOCK_BAD = [
    (lambda d: d.__setitem__("h", 0.0), "method_state.h: must be > 0"),
    (lambda d: d.__setitem__("h_last", -2.0), "method_state.h_last: must be >= 0 (or -1: none)"),
    (lambda d: d.__setitem__("error_estimate", -1.0), "method_state.error_estimate: must be >= 0"),
    (lambda d: d.__setitem__("stage_q", d["stage_q"].reshape(-1)), "method_state.stage_q: must have shape (4, 6)"),
    (lambda d: d["stage_v"].__setitem__((3, 5), np.inf), "method_state.stage_v[3, 5]: must be finite"),
    (lambda d: d.__setitem__("stage_t0", "0"), "method_state.stage_t0: must be a real number"),
    (lambda d: d["newton"]["piv"].__setitem__(0, 40), "method_state.newton.piv[0]"),
    (lambda d: d["newton"].__setitem__("lu", np.eye(3)), "method_state.newton.lu: must have shape (40, 40)"),
]


# knife_edge (n_y = 6)
_RKC_BAD = [
    (lambda d: d.__setitem__("h_next", 0.0), "method_state.h_next: must be > 0"),
    (lambda d: d.__setitem__("rho", -1.0), "method_state.rho: must be >= 0"),
    (lambda d: d.__setitem__("penalty", np.inf), "method_state.penalty: must be finite"),
    (lambda d: d.__setitem__("alpha", -0.5), "method_state.alpha: must be -1 exactly in the formulation whose value"),
    (lambda d: d.__setitem__("alpha", 2 ** 63), "method_state.alpha: must be -1 exactly in the formulation whose value"),
    (lambda d: d.__setitem__("penalty", 2 ** 63), r"method_state.penalty: must be in [1e-12, 1e+12], got 9.223372036854776e+18"),
    (lambda d: d["f_cur"].__setitem__(3, 1e6), "method_state.f_cur[3]: must equal qdd[0] = "),
    (lambda d: d.__setitem__("eigvec", np.zeros(3)), "method_state.eigvec: must have shape (6,)"),
    (lambda d: d.__setitem__("steps_since_rho", -1), "method_state.steps_since_rho: must be in 0.."),
    (lambda d: d.__setitem__("last_stages", 2.0), "method_state.last_stages: must be an integer"),
    (lambda d: d["dense"].__setitem__("h", np.array(0.0)), "method_state.dense.h: must be > 0"),
    (lambda d: d.pop("err_last"), "method_state: lacks ['err_last']"),
]


_BAD = [
    (lambda d: d.__setitem__("h_next", -1.0), "method_state.h_next: must be > 0"),
    (lambda d: d.__setitem__("h_next", 1e-300), "method_state.h_next: step size 1e-300 does not advance"),
    (lambda d: d.__setitem__("h_next", np.nan), "method_state.h_next: must be finite"),
    (lambda d: d.__setitem__("projection_iterations", -1), "method_state.projection_iterations: must be in 0.."),
    (lambda d: d.__setitem__("projection_iterations", 1.5), "method_state.projection_iterations: must be an integer"),
    (lambda d: d.__setitem__("extra", 1), "method_state: has unknown entries"),
    (lambda d: d.pop("f_cur"), "method_state: lacks ['f_cur']"),
    (lambda d: d.__setitem__("f_cur", np.zeros(7)), "method_state.f_cur: must have shape"),
    (lambda d: d["dense"].__setitem__("h", np.array(-1.0)), "method_state.dense.h: must be > 0"),
    (lambda d: d["dense"].pop("h"), "method_state.dense: lacks ['h']"),
    (lambda d: d["dense"][next(iter(d["dense"]))].__setitem__(0, np.inf), "method_state.dense."),
    # f_cur = [v; q''] of the point, as every step writes it
    (lambda d: d["f_cur"].__setitem__(3, 1.8e20), "method_state.f_cur[3]: must equal qdd[0] = "),
    (lambda d: d["f_cur"].__setitem__(0, -2.05e63), "method_state.f_cur[0]: must equal y (its velocities)[0] = "),
]


_SCHEMA_CASES = ([("knife_edge", method, "auto", *bad) for method in ("dopri5", "rk4") for bad in _BAD]
                 + [("two_link", "generalized-alpha", backend, *bad) for backend in ("python", "numba")
                    for bad in _GA_BAD]
                 + [("two_link", "bdf", backend, *bad) for backend in ("python", "numba") for bad in _BDF_BAD]
                 + [("knife_edge", "local-index1", backend, *bad) for backend in ("python", "numba")
                    for bad in _LI1_BAD]
                 + [("two_link", "spark", backend, *bad) for backend in ("python", "numba") for bad in _SPARK_BAD]
                 + [("two_link", "block-lstable", backend, *bad) for backend in ("python", "numba")
                    for bad in _BLOCK_BAD]
                 + [("knife_edge", "rkc-penalty", backend, *bad) for backend in ("python", "numba")
                    for bad in _RKC_BAD])


@pytest.mark.parametrize("model, method, backend, mutate, message", _SCHEMA_CASES)
def test_declared_schema_refuses_a_bad_method_state_and_changes_nothing(model, method, backend, mutate, message):
    """knife_edge: nonholonomic (m > 0, n_g > 0); two_link: a kept LU."""
    sim = cosim.Simulation(model, method, backend=backend)
    sim.do_step(0.0, 0.01)
    before = sim.serialize_state()
    state = sim.get_state()
    mutate(state["integrator"]["method_state"])
    with pytest.raises(StateError, match=re.escape(message)):
        sim.set_state(state)
    assert sim.serialize_state() == before
    sim.do_step(0.01, 0.01)


def test_the_writer_rewrites_a_stale_layout(tmp_path):
    from cosim.integrators import explicit_record
    from cosim.integrators.explicit_state import RECORD
    from cosim.integrators.state_decl import write_layout
    stale = tmp_path / "record.py"
    text = inspect.getsource(explicit_record)
    stale.write_text(text.replace("PIV = 16", "PIV = 17"), encoding="utf-8")
    assert write_layout(RECORD, stale) is True
    assert stale.read_text(encoding="utf-8") == text
    assert write_layout(RECORD, stale) is False


# blobs written by cosim 730669d (BDF's hand-written state dictionary): each is what its
# twin run below serializes (the default backend, numba); orders up to 5, the kept LU
# and J, a ring buffer of the order history that has wrapped (andrews: 2345 steps),
# the start (no LU yet), a fixed step, reuse_matrix with velocity_error "scaled" (that
# one written again after 9327d85, whose Newton round-off floor changed that run's bits)
BDF_BLOBS = [
    ("state_bdf_two_link.blob", "two_link", "bdf", {}, 3, 0.01),
    ("state_bdf_i2_pendulum_start.blob", "pendulum", "bdf-i2", {}, 0, 0.01),
    ("state_bdf_i2_pendulum.blob", "pendulum", "bdf-i2", {}, 3, 0.01),
    ("state_bdf_i1_two_link.blob", "two_link", "bdf-i1", {}, 3, 0.01),
    ("state_bdf_reuse_scaled_crank_slider.blob", "crank_slider", "bdf",
     dict(method_options=dict(reuse_matrix=True, velocity_error="scaled", max_order=3)), 3, 0.01),
    ("state_bdf_h_pendulum.blob", "pendulum", "bdf", dict(h=1e-3), 3, 0.01),
    ("state_bdf_i2_andrews_order5.blob", "andrews", "bdf-i2", dict(rtol=1e-8, atol=1e-10), 6, 0.005),
    ("state_bdf_i1_double_pendulum_order5.blob", "double_pendulum_natural", "bdf-i1",
     dict(rtol=1e-9, atol=1e-11, method_options=dict(error_norm="rms")), 10, 0.05),
]


@pytest.mark.parametrize("blob_name, model, method, kw, steps, dt", BDF_BLOBS, ids=[b[0][6:-5] for b in BDF_BLOBS])
def test_bdf_blob_written_before_the_declaration_restores_byte_for_byte_and_continues(
        blob_name, model, method, kw, steps, dt):
    warnings.simplefilter("ignore")
    blob = (DATA / blob_name).read_bytes()
    twin = cosim.Simulation(model, method, **kw)   # the run that wrote the blob
    for _ in range(steps):
        twin.do_step(twin.time, dt)
    for backend in ("python", "numba"):
        sim = cosim.Simulation(model, method, backend=backend, **kw)
        sim.deserialize_state(blob)
        assert sim.serialize_state() == blob, backend
    if _twin_continues(blob, sim, twin, model, method, kw, steps, dt):
        assert sim.integrator.order_counts == twin.integrator.order_counts


def test_bdf_state_without_a_kept_factor_drops_j_and_continues():
    """J is held only with the LU it belongs to: a state whose Newton memory has no LU
    and no J restores, reads back without J, and the next step forms the matrix."""
    sim = cosim.Simulation("two_link", "bdf")
    sim.do_step(0.0, 0.01)
    state = sim.get_state()
    ms = state["integrator"]["method_state"]
    for key in ("lu", "piv", "need_jac", "relax"):
        ms["newton"].pop(key)
    ms["J"] = None
    sim.set_state(state)
    after = sim.integrator.state()["method_state"]
    assert after["J"] is None and "lu" not in after["newton"]
    jacobians = sim.integrator.stats["jacobian_evaluations"]
    sim.do_step(0.01, 0.01)
    assert sim.integrator.stats["jacobian_evaluations"] > jacobians
    assert sim.integrator.state()["method_state"]["J"] is not None


@pytest.mark.parametrize("method, index, value, message", [
    # rkc-penalty's q' (seed form): C_q q' + C_t = -χ C (seed 000 eq. 91); its q'' the state's
    ("rkc-penalty", 0, -5.27e95, "state field integrator.method_state.f_cur: its velocities q' do not "
                                 "satisfy C_q q' + C_t = -χ C (seed 000 eq. 91"),
    ("rkc-penalty", 1, 1e6, "state field integrator.method_state.f_cur: its velocities q' do not satisfy"),
    ("rkc-penalty", 2, 1e20, "state field integrator.method_state.f_cur[2]: must equal qdd[0] = "),
    ("dopri5", 1, 1e6, "state field integrator.method_state.f_cur[1]: must equal y (its velocities)[1] = "),
    ("rk4", 3, 6.9e48, "state field integrator.method_state.f_cur[3]: must equal qdd[1] = "),
])
def test_a_stored_derivative_that_is_not_the_points_is_refused_unchanged(method, index, value, message):
    """The fuzzer's accepted-then-failed blobs of the explicit methods: an FSAL / first stage
    that is not the derivative at the stored point."""
    from cosim import serialization
    sim = cosim.Simulation("pendulum", method, **({"h": 1e-3} if method == "rk4" else {}))
    for _ in range(5):
        sim.do_step(sim.time, 0.01)
    before = sim.serialize_state()
    meta, data = serialization.loads(before)
    data["integrator"]["method_state"]["f_cur"][index] = value
    with pytest.raises(StateError, match=re.escape(message)):
        sim.deserialize_state(serialization.dumps(data, meta))
    assert sim.serialize_state() == before
    sim.do_step(sim.time, 0.01)


@pytest.mark.parametrize("method", ["generalized-alpha", "generalized-alpha-i2"])
@pytest.mark.parametrize("key, value, message", [
    # a = q''_prev + x and x_rate = x/h as the last step wrote them
    ("x_rate", -8.14e91, "state field integrator.method_state.x_rate[0]: the last step (h = "),
    ("a", 1.07e97, "state field integrator.method_state.x_rate[0]: the last step (h = "),
    ("qdd_prev", 3.0, "state field integrator.method_state.x_rate[0]: the last step (h = "),
    # the point before the last step, λ − h λ_rate, solved the equations of motion too
    ("lam_rate", -1.29e63, "state field integrator.y_prev, integrator.method_state.qdd_prev, "
                           "integrator.method_state.lam_rate: q'' and λ at the point 1 step back it "
                           "implies, t="),
])
def test_generalized_alpha_memory_of_the_last_step_is_checked_unchanged(method, key, value, message):
    """The fuzzer's accepted-then-failed blobs of generalized-α: a rate or a pseudo-
    acceleration that is not the last step's (the next predictor lands at 1e80)."""
    from cosim import serialization
    sim = cosim.Simulation("pendulum", method)
    for _ in range(5):
        sim.do_step(sim.time, 0.01)
    before = sim.serialize_state()
    meta, data = serialization.loads(before)
    integ = data["integrator"]
    assert sim.integrator.state_declaration._last_step(integ) == integ["method_state"]["h_last"] > 0
    integ["method_state"][key][0] = value
    with pytest.raises(StateError, match=re.escape(message)):
        sim.deserialize_state(serialization.dumps(data, meta))
    assert sim.serialize_state() == before
    sim.do_step(sim.time, 0.01)


def test_generalized_alpha_previous_point_is_the_accepted_one():
    """The check's premise on a genuine state: λ − h λ_rate at (t_prev, y_prev, q''_prev)
    solves the equations far inside EOM_TOLERANCE, with the inputs changing."""
    from cosim.state_schema import EOM_TOLERANCE
    sim = cosim.Simulation("two_link", "generalized-alpha")
    rng = np.random.default_rng(1)
    for k in range(20):
        sim.set_inputs(list(rng.normal(size=len(sim.input_names))))
        sim.do_step(sim.time, 0.01)
        state = sim.get_state()["integrator"]
        points = sim.integrator.state_declaration.solved_points(state)
        assert len(points) == 2 and points[1][1] == state["t_prev"]
        _, t, y, qdd, lam = points[1]
        model = sim.integrator.model
        q, v = model.split(y)
        r = model.mass(q, t) @ qdd + model.constraint_jacobian(q, t).T @ lam - model.forces(q, v, t, state["u"])
        assert np.abs(r).max() <= 1e-5 * EOM_TOLERANCE * np.abs(model.forces(q, v, t, state["u"])).max()
