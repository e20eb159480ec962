"""LTI plants: the state-transition method (seed 001 §3.5) equals the analytic
sampled-data solution to machine precision for any step; general integrators
converge to it; signal generators as augmented LTI systems (example 3.4)."""
import numpy as np
import pytest

import cosim
from cosim.blocks import StateFeedback
from cosim.integrators import available_methods, method_class
from cosim.integrators import state_transition as st
from cosim.models.base import MultibodyModel, Parameter, Signal

# a well-conditioned 3-state plant: a damped oscillator and a real pole, two inputs
A3 = np.array([[0.0, 1.0, 0.0], [-4.0, -0.4, 0.5], [0.0, 0.0, -2.0]])
B3 = np.array([[0.0, 0.0], [1.0, 0.0], [0.3, 1.0]])
C3 = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
D3 = np.array([[0.0, 0.1], [0.0, 0.0]])
X0 = np.array([1.0, -0.5, 0.25])


def exact_zoh(A, B, x, u, h):
    """Independent reference (eigendecomposition, no matrix exponential):
    x(h) = V e^{Λh} V⁻¹ x + V diag((e^{λh} − 1)/λ) V⁻¹ B u  (seed 001 eq. 3.19)."""
    lam, V = np.linalg.eig(A)
    Vi = np.linalg.inv(V)
    e = np.exp(lam * h)
    phi_int = np.where(np.abs(lam * h) > 1e-8, (e - 1.0) / np.where(lam == 0, 1, lam), h)
    x_new = V @ (e * (Vi @ x)) + V @ (phi_int * (Vi @ (B @ u)))
    return x_new.real


def lti_sim(**kw):
    return cosim.Simulation(model="lti", method="state-transition",
                            params=dict(A=A3, B=B3, C=C3, D=D3, x0=X0), **kw)


@pytest.mark.parametrize("h", [1e-5, 1e-3, 0.0137, 0.25, 3.0])
def test_state_transition_is_the_exact_sampled_data_solution_for_any_step(h):
    sim = lti_sim()
    rng = np.random.default_rng(7)
    x = X0.copy()
    scale = 0.0
    for k in range(40):
        u = rng.uniform(-1, 1, size=2)
        sim.set_inputs(u)
        out = sim.get_outputs()
        assert out == pytest.approx(C3 @ x + D3 @ u, rel=1e-13, abs=1e-14)
        sim.do_step(sim.time, h)
        x = exact_zoh(A3, B3, x, u, h)
        scale = max(scale, np.max(np.abs(x)))
        err = np.max(np.abs(sim.y - x))
        assert err <= 5e-14 * max(1.0, scale) * (k + 1), (k, err)
    assert sim.time == pytest.approx(40 * h, rel=1e-14)
    assert sim.stats["steps"] == 40 and sim.stats["newton_iterations"] == 0


def test_variable_communication_steps_and_dense_output_are_exact():
    sim = lti_sim()
    x = X0.copy()
    for h, u in [(0.1, [1.0, 0.0]), (1e-4, [0.0, -1.0]), (2.0, [0.5, 0.5]), (0.3333, [0.0, 0.0])]:
        sim.set_inputs(u)
        sim.do_step(sim.time, h)
        integ = sim.integrator
        for frac in (0.25, 0.5, 0.9):
            tau = frac * h
            ref = exact_zoh(A3, B3, x, np.array(u), tau)
            assert np.max(np.abs(integ.dense_output(integ.t_prev + tau) - ref)) < 1e-13
        x = exact_zoh(A3, B3, x, np.array(u), h)
        assert np.max(np.abs(sim.y - x)) < 1e-13


def test_transition_matrices_are_cached_per_distinct_step(monkeypatch):
    calls = []
    original = st.van_loan
    monkeypatch.setattr(st, "van_loan", lambda A, B, h: calls.append(h) or original(A, B, h))
    sim = lti_sim()
    for _ in range(50):
        sim.do_step(sim.time, 0.5)  # 0.5 is exact: every step has the same h
    assert calls == [0.5]
    Phi, H = original(A3, B3, 0.5)
    # Van Loan blocks against the series of seed 001 eqs. 3.20-3.21 (converged to eps)
    P, Hs, term = np.eye(3), 0.5 * np.eye(3), np.eye(3)
    for k in range(1, 40):
        term = term @ A3 * 0.5 / k
        P += term
        Hs += term * 0.5 / (k + 1)
    assert np.max(np.abs(Phi - P)) < 1e-15 and np.max(np.abs(H - Hs @ B3)) < 1e-15


def test_changed_matrices_invalidate_the_cache():
    sim = cosim.Simulation(model="lti", method="state-transition")
    sim.set_parameter("A", [[0.0, 1.0], [-9.0, 0.0]])  # before the first step
    sim.do_step(0.0, 0.1)
    x = exact_zoh(np.array([[0.0, 1.0], [-9.0, 0.0]]), np.array([[0.0], [1.0]]),
                  np.array([1.0, 0.0]), np.zeros(1), 0.1)
    assert np.max(np.abs(sim.y - x)) < 1e-15


def test_closed_loop_with_discrete_state_feedback_is_the_exact_discrete_loop():
    """Plant + u_k = −K x_k at T = 10 ms, communication step 3 ms: x_{k+1} = (Φ(T) − H(T)K) x_k."""
    K = np.array([[2.0, 1.5, 0.0], [0.0, 0.0, 1.0]])
    # the LTI outputs are C x; give the plant full-state outputs for the feedback
    sim = cosim.Simulation(model="lti", method="state-transition",
                           params=dict(A=A3, B=B3, C=np.eye(3), D=np.zeros((3, 2)), x0=X0,
                                       output_names=["x0", "x1", "x2"], input_names=["u0", "u1"]),
                           blocks=[StateFeedback("k", 0.01, K, outputs=["v0", "v1"])],
                           connections=["x0 -> k.x0", "x1 -> k.x1", "x2 -> k.x2",
                                        "k.v0 -> u0", "k.v1 -> u1"])
    assert sim.base_step == 0.01 and sim.input_names == ()
    x, xs = X0.copy(), {}
    for k in range(31):  # exact discrete closed loop at the sample instants t = k T
        xs[k] = x
        x = exact_zoh(A3, B3, x, -K @ x, 0.01)
    for _ in range(100):  # 0.3 s in 3 ms communication steps
        sim.do_step(sim.time, 0.003)
        k = round(sim.time / 0.01)
        if abs(sim.time - k * 0.01) < 1e-12:
            assert np.max(np.abs(sim.y - xs[k])) < 1e-14, k
    assert np.max(np.abs(sim.y - xs[30])) < 1e-14


def test_sine_generator_augmented_system_is_exact_for_huge_steps():
    """x' = −a x + b u, u = U0 sin(ω t + φ) (seed 001 example 3.4): the augmented system
    with the state-transition method reproduces the closed-form response at any step."""
    a, b, U0, w, phi = 0.7, 2.0, 1.5, 3.0, 0.4
    F, G, v0 = st.sine_generator(U0, w, phi)
    As, Bs, Cs, Ds, v0_all = st.augment_with_generators([[-a]], [[b]], [[1.0]], [[0.0]], {0: (F, G, v0)})
    assert As.shape == (3, 3) and Bs.shape == (3, 0) and Cs.shape == (1, 3)
    x0 = 0.3
    sim = cosim.Simulation(model="lti", method="state-transition",
                           params=dict(A=As, B=Bs, C=np.vstack([Cs, [0.0, 1.0, 0.0]]), D=np.zeros((2, 0)),
                                       x0=np.concatenate([[x0], v0_all])))

    def exact(t):
        # particular solution of x' + a x = b U0 sin(w t + phi) plus the homogeneous part
        amp = b * U0 / (a * a + w * w)
        xp = amp * (a * np.sin(w * t + phi) - w * np.cos(w * t + phi))
        return xp + (x0 - amp * (a * np.sin(phi) - w * np.cos(phi))) * np.exp(-a * t)

    for h in (0.9, 2.3, 0.001):
        sim.do_step(sim.time, h)
        t = sim.time
        y, u = sim.get_outputs()
        assert y == pytest.approx(exact(t), abs=2e-14)
        assert u == pytest.approx(U0 * np.sin(w * t + phi), abs=1e-13)


class MassSpring(MultibodyModel):
    """The default LTI plant (m = 1, k = 4, c = 0.4, input force) as an unconstrained
    multibody model, so the general DAE integrators solve the same system."""

    name = "mass_spring_mb"
    coordinates = ("position",)
    parameters = (Parameter("k", 4.0), Parameter("c", 0.4))
    inputs = (Signal("force"),)
    outputs = (Signal("position"), Signal("velocity"))
    constant_mass = True

    def initial_state(self):
        return np.array([1.0]), np.array([0.0])

    def mass(self, q, t):
        return np.eye(1)

    def forces(self, q, v, t, u):
        return np.array([-self.params["k"] * q[0] - self.params["c"] * v[0] + u[0]])

    def force_jacobians(self, q, v, t, u):
        return np.array([[-self.params["k"]]]), np.array([[-self.params["c"]]])

    def gamma(self, q, v, t):
        return np.zeros(0)

    def outputs_qv(self, t, q, v, u):
        return np.array([q[0], v[0]])


def general_methods():
    out = []
    for name in available_methods():
        if name == "state-transition":
            continue
        kinds = method_class(name).model_kinds
        if "first_order" in kinds:
            out.append((name, "first_order"))
        elif "multibody" in kinds and name in ("generalized-alpha", "bdf"):
            out.append((name, "multibody"))
    return out


@pytest.mark.parametrize("method, kind", general_methods())
def test_general_integrators_converge_to_the_exact_sampled_data_solution(method, kind):
    inputs = [1.0, -0.5, 0.0, 2.0, 0.3]

    def run(rtol):
        model = "lti" if kind == "first_order" else MassSpring()
        sim = cosim.Simulation(model=model, method=method, rtol=rtol, atol=rtol * 1e-2)
        for u in inputs * 4:
            sim.set_inputs([u])
            sim.do_step(sim.time, 0.1)
        return sim.get_outputs()[:2]

    exact = cosim.Simulation(model="lti", method="state-transition")
    for u in inputs * 4:
        exact.set_inputs([u])
        exact.do_step(exact.time, 0.1)
    ref = exact.get_outputs()
    errors = [np.max(np.abs(run(rtol) - ref)) for rtol in (1e-4, 1e-6, 1e-8)]
    assert errors[2] < errors[0] / 20, errors
    assert errors[2] < 1e-5, errors


DETERMINISM_SCRIPT = """
import hashlib, json, numpy as np, cosim
from cosim import blas
n = 160
rng = np.random.default_rng(3)
A = -2.0 * np.eye(n) + 0.1 * rng.standard_normal((n, n))
B = rng.standard_normal((n, 2))
C = np.eye(n)[:2]
sim = cosim.Simulation("lti", "state-transition", params={"A": A.tolist(), "B": B.tolist(),
                       "C": C.tolist(), "D": np.zeros((2, 2)).tolist()})
for k in range(30):
    sim.set_inputs([np.sin(0.1 * k), 1.0])
    sim.do_step(sim.time, 0.01 * (1 + k % 3))
mid = sim.integrator.dense_output(sim.time - 0.004)
threads = [get() for get, _ in blas.libraries()]
print(json.dumps({"y": hashlib.sha256(sim.y.tobytes() + mid.tobytes()).hexdigest(), "threads": threads}))
"""


def test_state_transition_is_bit_identical_for_1_and_2_blas_threads():
    """Issue 14 item 5: a 160-state LTI model differed bit-wise between 1 and 2 OpenBLAS
    threads; the state-transition kernels now run BLAS single-threaded (cosim.blas), and
    the process's thread count is restored afterwards."""
    import json
    import os
    import subprocess
    import sys
    out = {}
    for n in ("1", "2"):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n)
        proc = subprocess.run([sys.executable, "-c", DETERMINISM_SCRIPT], capture_output=True,
                              text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out[n] = json.loads(proc.stdout)
    assert out["1"]["y"] == out["2"]["y"]
    assert out["2"]["threads"] and all(t == 2 for t in out["2"]["threads"])  # restored
