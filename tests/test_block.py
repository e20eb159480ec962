"""L-stable block methods (seed 004): construction, L-stability, order, DAE forms, state."""
import numpy as np
import pytest

from cosim.errors import InvalidInputError
from cosim.integrators import make_integrator
from cosim.integrators.block import (NODE_FAMILIES, block_coefficients, block_nodes, check_l_stability,
                                     classical_order, default_pade_k, pade_coefficients,
                                     stability_function)
from cosim.models import load_model
from reference import ForcedOscillator


@pytest.mark.parametrize("family", NODE_FAMILIES)
@pytest.mark.parametrize("r", [2, 3, 4])
def test_stability_function_is_pade_and_l_stable(family, r):
    k = default_pade_k(r)
    B, d = block_coefficients(block_nodes(r, family), k)
    P, Q = pade_coefficients(k, r)
    z = np.array([0.3 + 0.2j, -2.0, 5j, -7.0 + 1.0j, -40.0])
    pade = np.polyval(P[::-1], z) / np.polyval(Q[::-1], z)
    assert np.max(np.abs(stability_function(B, d, z) - pade)) < 1e-10
    r_imag, r_inf = check_l_stability(B, d)
    assert r_imag <= 1.0 + 1e-12          # |R(iy)| ≤ 1  ⇒ A-stable (maximum principle)
    assert r_inf < 1e-5                  # R(−10⁶) ≈ 0  ⇒ L-stable
    # left half plane sample (redundant with the max principle, but checks no pole there)
    zz = -np.geomspace(1e-3, 1e4, 50)[:, None] + 1j * np.linspace(-50, 50, 21)[None, :]
    assert np.max(np.abs(stability_function(B, d, zz.ravel()))) <= 1.0 + 1e-12


def test_seed_pade_pairs_and_nodes():
    assert default_pade_k(3) == 2 and default_pade_k(4) == 2   # seed: (2,3) for r=3, (2,4) for r=4
    assert np.allclose(block_nodes(3, "equidistant"), [1 / 3, 2 / 3, 1])
    assert np.allclose(block_nodes(3, "legendre"), [0.5 - np.sqrt(3) / 6, 0.5 + np.sqrt(3) / 6, 1])
    for fam in NODE_FAMILIES:
        c = block_nodes(5, fam)
        assert c[-1] == 1.0 and np.all(np.diff(c) > 0) and c[0] > 0


def _final(h, r, index, nodes="equidistant", T=0.4, backend="python"):
    it = make_integrator(load_model("two_link"), "block-lstable", backend=backend, h=h, r=r, index=index,
                         nodes=nodes, newton_tol=1e-12)
    it.initialize(0.0)
    it.advance(T)
    return it


@pytest.mark.parametrize("r,nodes", [(2, "equidistant"), (3, "legendre"), (3, "chebyshev")])
def test_observed_order_index1(r, nodes, backend):
    ref = _final(0.4 / 200, 5, 1, "legendre", backend=backend).y     # order-8 method, error ≪ 1e-13
    B, d = block_coefficients(block_nodes(r, nodes), default_pade_k(r))
    p = classical_order(B, d)
    assert p == r + 1
    errs = [np.max(np.abs(_final(h, r, 1, nodes, backend=backend).y - ref)) for h in (0.05, 0.025)]
    observed = np.log2(errs[0] / errs[1])
    assert abs(observed - p) < 0.3, (errs, observed, p)


@pytest.mark.parametrize("index", [1, 2, 3])
def test_dae_forms_constraint_levels(index, backend):
    it = _final(0.01, 3, index, T=0.5, backend=backend)
    pos, vel, acc = it.model.residual_levels(it.t, it.y, it.qdd)
    if index == 3:
        assert pos < 1e-12                  # position constraint enforced
    elif index == 2:
        assert vel < 1e-10 and pos < 1e-5   # velocity constraint enforced, small drift
    else:
        assert acc < 1e-7 and pos < 1e-5    # acceleration level enforced


def _rk4_index1_energy_drift(model, h, n):
    """Plain classical RK4 on the index-1 form (no projection), seed 004 Table 3."""
    from cosim.integrators.common import consistent_accelerations
    nq = model.n_q
    u = model.default_inputs()

    def f(y):
        a, _ = consistent_accelerations(model, 0.0, y[:nq], y[nq:], u)
        return np.concatenate([y[nq:], a])

    y = model.initial_y()
    E0 = model.energy(0, y)
    for _ in range(n):
        k1 = f(y)
        k2 = f(y + 0.5 * h * k1)
        k3 = f(y + 0.5 * h * k2)
        k4 = f(y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return abs(model.energy(0, y) - E0)


def test_energy_bounded_where_rk4_grows(backend):
    model = load_model("two_link")
    h, T = 0.01, 3.0
    it = make_integrator(load_model("two_link"), "block-lstable", backend=backend, h=h, r=4, index=1)
    it.initialize(0.0)
    E0 = it.model.energy(0, it.y)
    drift = []
    for k in range(1, int(T / h) + 1):
        it.advance(k * h)
        drift.append(abs(it.model.energy(0, it.y) - E0))
    rk4 = _rk4_index1_energy_drift(model, h, int(T / h))
    assert max(drift) < 1e-4
    assert rk4 > 100 * max(drift), (rk4, max(drift))


def test_restore_continue_bit_identical(backend):
    it = make_integrator(load_model("two_link"), "block-lstable", backend=backend, h=0.01, r=3, index=3,
                         nodes="chebyshev", error_estimate=True)
    it.initialize(0.0)
    it.advance(0.2)
    snap = it.state()
    it.advance(0.5)
    y1, qdd1, st1 = it.y.copy(), it.qdd.copy(), dict(it.stats)
    dense1 = it.dense_output(0.495)
    it.restore(snap)
    it.advance(0.5)
    assert np.array_equal(it.y, y1) and np.array_equal(it.qdd, qdd1) and it.stats == st1
    assert np.array_equal(it.dense_output(0.495), dense1)
    assert it.error_estimate > 0


def test_dense_output_matches_endpoints_and_is_accurate(backend):
    it = make_integrator(load_model("two_link"), "block-lstable", backend=backend, h=0.02, r=4, index=1)
    it.initialize(0.0)
    it.advance(0.1)
    assert np.allclose(it.dense_output(it.t), it.y, atol=1e-12)
    assert np.allclose(it.dense_output(it.t_prev), it.y_prev, atol=1e-12)
    fine = make_integrator(load_model("two_link"), "block-lstable", backend=backend, h=0.01, r=4, index=1)
    fine.initialize(0.0)
    fine.advance(0.09)
    assert np.max(np.abs(it.dense_output(0.09) - fine.y)) < 1e-6


@pytest.mark.parametrize("opts,match", [
    ({"r": 1}, "r .*>= 2"), ({"r": 2.5}, "r "), ({"nodes": "gauss"}, "nodes"),
    ({"index": 4}, "index"), ({"pade_k": 0, "r": 4}, "pade_k"), ({"newton_tol": float("nan")}, "newton_tol"),
])
def test_bad_options(opts, match, backend):
    with pytest.raises(InvalidInputError, match=match):
        make_integrator(load_model("two_link"), "block-lstable", backend=backend, h=0.01, **opts)


def test_fixed_step_without_h_says_so(backend):
    with pytest.warns(UserWarning, match="fixed-step method"):
        it = make_integrator(load_model("two_link"), "block-lstable", backend=backend, rtol=1e-6)
    assert it.h == 0.01 and it.backend == backend


@pytest.mark.parametrize("index,h,T", [(1, 0.04, 1.0), (2, 0.04, 1.0), (3, 5e-5, 0.01)])
def test_stage_solve_robust_at_large_and_small_steps(index, h, T, backend):
    """Large steps (fast links, simplified Jacobian far from the solution) and tiny
    index-3 steps (round-off floor of C/h²) both converge."""
    it = make_integrator(load_model("two_link"), "block-lstable", backend=backend, h=h, r=3, index=index)
    it.initialize(0.0)
    it.advance(T)
    assert it.t == T and np.all(np.isfinite(it.y))


def test_serialized_state_continues_bit_identically_in_a_fresh_simulation(backend):
    import cosim
    opts = {"r": 3, "index": 3, "nodes": "chebyshev", "error_estimate": True}
    sim = cosim.Simulation(model="two_link", method="block-lstable", h=0.01, method_options=opts,
                           backend=backend)
    assert sim.integrator.backend == backend
    for _ in range(5):
        sim.do_step(sim.time, 0.02)
    blob = sim.serialize_state()
    for _ in range(5):
        sim.do_step(sim.time, 0.02)
    fresh = cosim.Simulation(model="two_link", method="block-lstable", h=0.01, method_options=opts,
                             backend=backend)
    fresh.deserialize_state(blob)
    for _ in range(5):
        fresh.do_step(fresh.time, 0.02)
    assert fresh.time == sim.time and np.array_equal(fresh.y, sim.y)


def _jump_reference(rhs, y0, t_jump, times):
    """The angle/position of an ODE whose input jumps at t_jump (solve_ivp at rtol 1e-12)."""
    from scipy.integrate import solve_ivp
    before = solve_ivp(lambda t, y: rhs(y, 0.0), (0.0, t_jump), y0, rtol=1e-12, atol=1e-14)
    after = solve_ivp(lambda t, y: rhs(y, 1.0), (t_jump, times[-1]), before.y[:, -1], rtol=1e-12,
                      atol=1e-14, dense_output=True)
    return [after.sol(t)[0] for t in times]


@pytest.mark.parametrize("case", ["oscillator", "pendulum"])
def test_input_jump_starts_from_accelerations_of_the_new_input(case, backend):
    """An input that jumps at t = 0.5 (h = 10 ms): the step after the jump starts from
    q'' solved with the new input, not the last step's (the old input's).  Measured
    (python backend; numba gives the same figures): first step after the jump and t = 1
    against solve_ivp at rtol 1e-12 — oscillator (force 0 → 50) 3.9e-4 and 9.9e-5 from
    the old acceleration, 6.3e-14 and 3.1e-13 now; pendulum (torque 0 → 5 N·m) 3.9e-5 and
    1.3e-3 before, 1.7e-11 and 6.2e-11 now.  Bound 1e-8: the reference's and the method's
    errors far below it, the stale start far above."""
    if case == "oscillator":
        if backend == "numba":
            pytest.skip("a plain-Python user model runs on the python backend")
        model, u = ForcedOscillator(), np.array([50.0])
        rhs, y0, angle = (lambda y, s: [y[1], -40.0 * y[0] - 0.5 * y[1] + 50.0 * s]), [0.1, 0.0], \
            (lambda y: y[0])
    else:
        model, u = load_model("pendulum"), np.array([5.0, 0.0, 0.0])
        rhs, y0, angle = (lambda y, s: [y[1], -9.81 * np.sin(y[0]) + 5.0 * s]), [np.pi / 4, 0.0], \
            (lambda y: np.arctan2(y[0], -y[1]))
    h, t_jump = 0.01, 0.5
    ref = _jump_reference(rhs, y0, t_jump, [t_jump + h, 1.0])
    it = make_integrator(model, "block-lstable", backend=backend, h=h)
    it.initialize(0.0)
    it.advance(t_jump)
    it.set_inputs(u)
    snap = it.state()
    it.advance(t_jump + h)
    first = abs(angle(it.y) - ref[0])
    it.advance(1.0)
    assert first < 1e-8 and abs(angle(it.y) - ref[1]) < 1e-8, (first, abs(angle(it.y) - ref[1]))
    y1, stats1 = it.y.copy(), dict(it.stats)
    it.restore(snap)                      # the state right after the restart continues bit-identically
    it.advance(t_jump + h)
    it.advance(1.0)
    assert np.array_equal(it.y, y1) and it.stats == stats1


def test_workspace_names_follow_its_tuple_order():
    """Each W_ name of block_record indexes the array its declaration describes: every
    index of workspace()'s tuple named once, each with its declared shape (sizes chosen
    so that n, m, N = r (n + m), 2n and ``extra`` differ), no two arrays overlapping."""
    from cosim.integrators import block_record as R
    n, m, r, extra = 3, 2, 5, 7
    N = r * (n + m)
    declared = {  # the shapes the comments next to the W_ names give
        "W_Q0": (n,), "W_V0": (n,), "W_A0": (n,), "W_LAM0": (m,), "W_NEWTON_WEIGHTS": (N,),
        "W_DELTA": (N,), "W_RESIDUAL": (N,), "W_J": (N, N),
        "W_STAGE_A": (r, n), "W_STAGE_V": (r, n), "W_STAGE_Q": (r, n), "W_M": (n, n), "W_CQ": (m, n),
        "W_FORCES": (n,), "W_C": (m,), "W_CT": (m,), "W_GAMMA": (m,),
        "W_DFORCES_DQ": (n, n), "W_DFORCES_DV": (n, n), "W_DCQT_LAM_DQ": (n, n), "W_DMA_DQ": (n, n),
        "W_KQ": (n, n), "W_DROWS_DQ": (m, n), "W_DROWS_DV": (m, n),
        "W_ROWS0": (m,), "W_ROWS1": (m,), "W_SHIFTED": (n,),
        "W_FD_RESIDUAL0": (N,), "W_FD_RESIDUAL1": (N,), "W_FD_DELTA": (N,),
        "W_EST": (2 * n,), "W_EST_WEIGHTS": (2 * n,), "W_Y_NEW": (2 * n,), "W_SNAPSHOT": (extra,)}
    w = R.workspace(n, m, r, extra)
    names = {k: getattr(R, k) for k in dir(R) if k.startswith("W_")}
    assert set(names) == set(declared)
    assert sorted(names.values()) == list(range(len(w)))
    for name, k in names.items():
        assert w[k].shape == declared[name], name
    for k, a in enumerate(w):
        a[...] = k + 1.0
    assert all(np.all(a == k + 1.0) for k, a in enumerate(w))   # no array overwrote another


def test_workspace_names_hold_what_they_say_after_a_step():
    """One step of the (uncompiled) kernel on the two-link arm with a workspace of the
    caller's: the step start, the stages and y_{k+1} are where their names say."""
    from cosim.integrators import block_kernel as K
    it = make_integrator(load_model("two_link"), "block-lstable", backend="python", h=0.01, r=3, index=2)
    it.initialize(0.0)
    S, I, LU = it._S.copy(), it._I.copy(), it._LU.copy()
    n, m, r = I[K.I_N], I[K.I_M], I[K.I_R]
    o = K.offsets(n, m, r)
    o_y, o_yp, o_qdd, o_lam = o[K.O_Y], o[K.O_YP], o[K.O_QDD], o[K.O_LAM]
    y0, a0, lam0 = S[o_y:o_y + 2 * n].copy(), S[o_qdd:o_qdd + n].copy(), S[o_lam:o_lam + m].copy()
    w = K.workspace(n, m, r)
    assert K.step(it._fns, S, I, LU, it._u_c, it._parameters(), 1.0, w) == K.OK
    y1, a1 = S[o_y:o_y + 2 * n], S[o_qdd:o_qdd + n]
    assert np.array_equal(w[K.W_Q0], y0[:n]) and np.array_equal(w[K.W_V0], y0[n:])
    assert np.array_equal(w[K.W_A0], a0) and np.array_equal(w[K.W_LAM0], lam0)
    assert np.array_equal(S[o_yp:o_yp + 2 * n], y0) and not np.array_equal(y1, y0)
    assert np.array_equal(w[K.W_Y_NEW], y1)
    assert np.array_equal(w[K.W_STAGE_Q][r - 1], y1[:n]) and np.array_equal(w[K.W_STAGE_V][r - 1], y1[n:])
    assert np.array_equal(w[K.W_STAGE_A][r - 1], a1)
    assert np.array_equal(w[K.W_STAGE_A][0], a0 + w[K.W_DELTA][:n])   # A_i = a_k + δ_i
