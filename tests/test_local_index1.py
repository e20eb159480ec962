"""Local equivalent index-1 method (seed 002): null-space bases by QR and by
Gaussian elimination, order 2 of the trapezoidal discretisation, the seed's
two-link example against an independent reference, restore, options."""
import numpy as np
import pytest

from cosim import load_model, make_integrator
from cosim.errors import InvalidInputError, SingularMatrixError
from cosim.integrators.local_index1 import nullspace_gauss, nullspace_qr

from reference import index1_reference, index1_solution

SEED002 = dict(m1=1.0, m2=1.0, l1=1.0, l2=2.0, theta1_0=0.0, theta2_0=0.0)


def _two_link():
    return load_model("two_link", **SEED002)


def test_seed002_initial_state():
    q0 = _two_link().initial_y()[:6]
    assert np.allclose(q0, [0.5, 0, 0, 2, 0, 0])


@pytest.mark.parametrize("basis", [nullspace_qr, nullspace_gauss])
def test_nullspace_bases(basis):
    rng = np.random.default_rng(3)
    model = _two_link()
    for _ in range(5):
        q = model.initial_y()[:6] + 0.3 * rng.standard_normal(6)
        Cq = model.constraint_jacobian(q, 0.0)
        V = basis(Cq)
        assert V.shape == (6, 2)
        assert np.max(np.abs(Cq @ V)) < 1e-14
        assert np.linalg.matrix_rank(V) == 2
        # seed 002 Proposition 3: [VᵀM; C_q] is nonsingular
        assert np.linalg.cond(np.vstack([V.T @ model.mass(q, 0.0), Cq])) < 1e8
    if basis is nullspace_qr:
        assert np.allclose(V.T @ V, np.eye(2), atol=1e-14)
    else:  # Gauss: an identity block in the free (non-pivot) coordinates
        assert sorted(np.round(np.abs(V).max(axis=1), 12).tolist()).count(1.0) >= 2


@pytest.mark.parametrize("basis", [nullspace_qr, nullspace_gauss])
def test_nullspace_rank_deficient_raises(basis):
    Cq = np.array([[1.0, 2.0, 0.0], [2.0, 4.0, 0.0]])
    with pytest.raises(SingularMatrixError, match="rank deficient"):
        basis(Cq)


@pytest.mark.parametrize("nullspace", ["qr", "gauss"])
@pytest.mark.parametrize("iteration", ["seed", "newton"])
def test_order_two(nullspace, iteration, backend):
    model = _two_link()
    T = 0.5
    q, v = index1_reference(model, T)
    ref = np.concatenate([q, v])
    hs = [0.01, 0.005, 0.0025]
    errs = []
    for h in hs:
        it = make_integrator(model, "local-index1", backend=backend, h=h, nullspace=nullspace,
                             iteration=iteration)
        it.initialize()
        it.advance(T)
        errs.append(np.max(np.abs(it.y - ref)))
    order = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert abs(order - 2.0) <= 0.3, errs


def test_seed002_example_h_1e3_against_reference(backend):
    """Seed 002 §6: two-link arm, q0 = [0.5, 0, 0, 2, 0, 0], h = 1e-3."""
    model = _two_link()
    T = 1.0
    ref = index1_solution(model, T)
    it = make_integrator(model, "local-index1", backend=backend, h=1e-3)
    assert it.backend == backend
    it.initialize()
    worst = 0.0
    while it.t < T:
        it.step(T)
        pos, vel, _ = model.residual_levels(it.t, it.y)
        assert pos < 1e-12 and vel < 1e-10          # f(x) = 0 holds after every step
        worst = max(worst, np.max(np.abs(it.y[:6] - ref.sol(it.t)[:6])))
    assert it.stats["steps"] == 1000
    assert worst < 5e-5, worst
    # gauss and qr bases give the same discrete solution (same square system)
    it2 = make_integrator(model, "local-index1", backend=backend, h=1e-3, nullspace="gauss")
    it2.initialize()
    it2.advance(T)
    assert np.max(np.abs(it2.y - it.y)) < 1e-10


def test_adaptive_mode_and_dense_output(backend):
    model = _two_link()
    T = 0.5
    ref = index1_solution(model, T)
    it = make_integrator(model, "local-index1", backend=backend, rtol=1e-7, atol=1e-7)
    it.initialize()
    while it.t < T:
        it.step(T)
        tm = 0.5 * (it.t_prev + it.t)
        assert np.max(np.abs(it.dense_output(tm)[:6] - ref.sol(tm)[:6])) < 1e-4
        assert np.array_equal(it.dense_output(it.t), it.y)
    assert np.max(np.abs(it.y - ref.y[:, -1])) < 1e-4
    assert 20 < it.stats["steps"] < 2000


@pytest.mark.parametrize("opts", [{"h": 2e-3}, {"rtol": 1e-6, "atol": 1e-6}])
def test_restore_and_continue_bit_identical(opts, backend):
    model = _two_link()
    it = make_integrator(model, "local-index1", backend=backend, **opts)
    it.initialize()
    it.advance(0.1)
    snap = it.state()
    it.advance(0.2)
    y1, stats1 = it.y.copy(), dict(it.stats)
    it.restore(snap)
    it.advance(0.2)
    assert np.array_equal(it.y, y1) and it.stats == stats1
    it2 = make_integrator(_two_link(), "local-index1", backend=backend, **opts)
    it2.initialize()
    it2.restore(snap)
    it2.advance(0.2)
    assert np.array_equal(it2.y, y1) and it2.stats == stats1


@pytest.mark.parametrize("opts,match", [
    ({"nullspace": "svd"}, "nullspace must be 'qr' or 'gauss', got 'svd'"),
    ({"iteration": "picard"}, "iteration must be 'seed' or 'newton', got 'picard'"),
    ({"h": -1e-3}, "h must be > 0, got -0.001"),
])
def test_bad_options(opts, match, backend):
    with pytest.raises(InvalidInputError, match=match):
        make_integrator(_two_link(), "local-index1", backend=backend, **opts)


def test_rejects_first_order_models():
    with pytest.raises(InvalidInputError, match="integrates multibody models"):
        make_integrator(load_model("lti"), "local-index1")


def test_nonholonomic_rows_in_local_system(backend):
    """Knife edge: V ⊥ [C_q; B] for the velocity rows, B v + b in f(x)."""
    model = load_model("knife_edge")
    it = make_integrator(model, "local-index1", backend=backend, h=1e-2)
    it.initialize()
    while it.t < 1.0:
        it.step(1.0)
        q, v = model.split(it.y)
        G = model.nonholonomic_matrix(q, it.t) @ v + model.nonholonomic_offset(q, it.t)
        assert np.max(np.abs(G)) < 1e-12
    ref = make_integrator(model, "dopri5", rtol=1e-10, atol=1e-12)
    ref.initialize()
    ref.advance(1.0)
    assert np.max(np.abs(it.y - ref.y)) < 1e-3
    # second order: halving h divides the difference by ~4
    it2 = make_integrator(model, "local-index1", backend=backend, h=5e-3)
    it2.initialize()
    it2.advance(1.0)
    ratio = np.max(np.abs(it.y - ref.y)) / np.max(np.abs(it2.y - ref.y))
    assert 3.0 < ratio < 5.3, ratio
