"""Robots from URDF: a multibody model in joint coordinates on pinocchio (issue 18).

``urdf_model_class(text)`` (or :func:`load_urdf` of a file) turns a URDF into
a :class:`URDFModel` subclass for that robot; instances take the usual
``**params``.  Fixed-base kinematic trees with revolute, continuous,
prismatic and fixed joints (:mod:`cosim.models.urdf_parse` checks the text).

Equations (seed 000 eq. 1): with the joint-space mass matrix M(q) (pinocchio
CRBA) and the bias b(q, v) = C(q, v) v + g(q) (RNEA with zero acceleration)

    M(q) q'' + C_qᵀ λ = Q = sat(u) − b(q, v) − d ∘ v − f ∘ tanh(v / v_s)

with one holonomic constraint per URDF ``<mimic>`` joint i following joint j,
``C = q_i − k q_j − o = 0`` (multiplier k, offset o; named ``<joint i>_mimic``;
C_q constant, C_t = γ = 0).  A robot without mimic joints is an ODE (m = 0).
The mimic joint keeps its coordinate and its effort input; its initial
position and velocity follow the joint it mimics (no ``.q0``/``.v0``
parameters of its own).

* ``sat(u)``: the joint efforts (inputs named after the joints) clipped to
  ±``<joint>.effort_limit`` (URDF ``<limit effort>``; 0 = no saturation); the
  first clip of each joint is said once (:meth:`URDFModel.input_limits`);
* ``d``: viscous damping, ``f``: Coulomb friction from URDF ``<dynamics
  damping friction>``; the friction is **smoothed** (tanh with the velocity
  scale ``friction_velocity_scale`` v_s, default 1e-3 rad/s or m/s), not an
  event-driven stick-slip: below v_s it acts as a stiff viscous term;
* gravity ``(gravity_x, gravity_y, gravity_z)`` in the root link's frame
  (default −9.81 m/s² along z).

Analytic Jacobians (pinocchio): Q_q = −∂RNEA/∂q and Q_v = −∂RNEA/∂v at zero
acceleration (``computeRNEADerivatives``) minus the damping/friction slopes;
(M a)_q = ∂RNEA/∂q at (q, 0, a) with zero gravity.

Position limits of revolute and prismatic joints are **stops** (on by default;
``position_limits=False`` leaves the joints free to pass them): per limited joint a
contact mode, the parameter ``<joint>.stop`` (0 free, −1 held at the lower
limit, +1 held at the upper; set by the events, so the state, its snapshots
and its blobs carry it; 0 at the start), and three switching functions (seed
001 §3.7):

* arrival, ``q − lower`` and ``upper − q`` (falling): at a crossing q is set
  onto the limit and an impulse along the joint makes its velocity
  −restitution × its velocity before (Newton's impact law through M and the
  mimic constraints: the other joints react; restitution 1 keeps the kinetic
  energy; stops arriving at one instant act in turn, and one of a mimic group
  whose impulse of that instant already struck it, or a joint already sent away,
  takes none: :meth:`URDFModel.apply_events`).  When the rebound speed ``restitution·|v|`` is at most
  ``stop_hold_velocity`` the impact is plastic (v = 0) and, if the load
  pushes the joint into the stop, the stop **holds** it: the mode becomes ±1;
* release, the stop's reaction r (falling): while held, the joint and its
  mimic group are removed from the equations (q'' = 0; rigid_body's held
  flags in p) and r is the multiplier of the hold in
  [M C_qᵀ −e_i; C_q 0 0; −e_iᵀ 0 0] [q''; λ; r] = [Q; 0; 0]; when r changes
  sign (the load pulls the joint away, within the step or by an input change
  at a communication point) the mode returns to 0 and the joint leaves the
  limit with zero velocity.

So a joint pushed into its limit rests there (no chattering), and restitution
1 with ``stop_hold_velocity`` 0 is a lossless bounce.

The switching functions are also compiled (:func:`stop_values`, from the
rigid-body kernels; pinocchio's are :meth:`URDFModel.event_functions_reference`),
and :meth:`URDFModel.quiet_step` lets :class:`cosim.Simulation` keep its compiled
fast path: one compiled call per communication step, then one compiled check of
the switching functions at its end; only a step that changed a sign goes to the
event path, which locates the event.

Names: coordinates are the URDF joint names (pinocchio's depth-first order),
inputs are the joint efforts named after the joints; outputs
``<joint>_position``, ``<joint>_velocity`` and, per requested frame (a link
or joint name), ``<frame>_x, _y, _z`` (m, root frame) and the orientation
quaternion ``<frame>_qx, _qy, _qz, _qw`` (on the compiled backend computed by the
outputs kernel :func:`rigid_body.tree_outputs` after each step, so reading them
costs a copy; on the python backend by pinocchio).  Parameters ``<joint>.q0``,
``<joint>.v0``, ``<joint>.damping``, ``<joint>.friction``,
``<joint>.effort_limit``, and ``gravity_x/y/z``, ``friction_velocity_scale``,
``restitution``.

Two implementations of the rigid-body terms, checked against each other
(tests/test_urdf.py, ~1e-15): the Python methods call pinocchio (C++, fast
from Python, and the field's reference), the compiled backend runs the
kernels of :mod:`cosim.models.rigid_body` (CRBA/RNEA in numba, complex-step
derivatives; pinocchio cannot be called from compiled code).  Both read one
parameter vector ``_p`` (:func:`rigid_body.tree_parameters`, packed from the
joint table pinocchio builds from the URDF, kept per URDF text by
:mod:`cosim.models.urdf_structure`) and share the joint terms
(:func:`rigid_body.joint_forces` and its slopes), so saturation, damping and
friction are written once.  While a compiled method runs the robot, M and Q of
the Python methods (the initial-condition analysis, the stops' events, and before
it the default rule's stiffness estimate at a fixed step, :mod:`cosim.method_choice`)
are the compiled kernels too (:meth:`URDFModel.use_compiled_kernels`): on a warm
cache such a run never imports pinocchio, which is made on first use for the rest.
Every robot runs the same compiled entry (``kernel_name``): one compilation
per machine for all URDFs.
"""
from __future__ import annotations

import math

import numpy as np

from .._version import install_hint
from .. import jit
from ..integrators.dense_lu import lu_factor_inplace, lu_solve_inplace
from ..errors import InvalidInputError, UnknownModelError
from . import rigid_body, urdf_parse, urdf_structure
from .rigid_body import _crba, _rnea, _tree_work, held_flags, joint_forces
from .base import Event, MultibodyModel, Parameter, Signal
from .ranges import NONNEGATIVE, POSITIVE, UNIT_INTERVAL, Range

STOP_MODE = Range(values=(-1.0, 0.0, 1.0))
# made by URDFModel._pinocchio_objects on first use
_PINOCCHIO_ATTRIBUTES = frozenset(("_pm", "_pd", "_pm0", "_pd0", "_joint_frames", "_pin", "_crba",
                                   "_rnea", "_rnea_derivatives", "_symmetrize"))

KERNELS = rigid_body.tree_kernels()

INSTALL_HINT = install_hint("robots")
_classes = {}  # (sha256, frames, limits) -> class


def pinocchio():
    """The pinocchio module, or an error naming the extra that installs it."""
    try:
        import pinocchio as pin
    except ImportError as exc:
        raise UnknownModelError(f"URDF robots need pinocchio (PyPI 'pin'), which is not "
                                f"importable ({exc}): {INSTALL_HINT}") from None
    return pin


class URDFModel(MultibodyModel):
    """Base of the per-robot classes made by :func:`urdf_model_class`."""

    description = "robot from URDF (pinocchio), joint coordinates"
    default_t_end = 5.0
    constant_mass = False
    robot = None            # urdf_parse.RobotDescription
    frames = ()             # names of the frames whose poses are outputs
    position_limits = False
    source_digest = None    # sha256 of the URDF text (in the state header)
    efforts_by_joint = True  # the ROS node maps JointState efforts to the inputs by joint name
    _structure = None       # urdf_structure.RobotStructure
    _compiled_terms = None  # (mass, forces) compiled, while a compiled method runs the robot
    _limited = ()           # indices of joints with position limits
    _event_coords = None    # event_coordinate of every switching function, in the present modes
    _held = ()              # indices of the joints held by a stop (their mimic groups)
    _held_set = frozenset()  # the same, a set
    _mimics = ()            # (mimic joint, followed joint, multiplier, offset) per constraint
    _root = _coef = _offs = None  # q_i = _coef[i] q_{_root[i]} + _offs[i] (mimic chains resolved)
    kernel_name = "urdf_tree"  # one compiled entry for every robot (the robot is in p)

    def kernels(self):
        return KERNELS

    def kernel_parameters(self):
        return self._p

    def kernel_outputs(self):
        """True: the outputs kernel (:func:`rigid_body.tree_outputs`) computes
        :meth:`outputs_qv` on the compiled backend (unless a subclass changed them)."""
        return (type(self).outputs_qv is URDFModel.outputs_qv
                and type(self).output_values is MultibodyModel.output_values)

    @classmethod
    def spec(cls):
        """The JSON-able model spec that rebuilds this class anywhere (FMU, scenario)."""
        return {"urdf_text": cls.robot.text, "frames": list(cls.frames),
                "position_limits": bool(cls.position_limits)}

    # -- parameters --------------------------------------------------------------------
    def setup(self):
        p, names = self.params, self.coordinates
        n = len(names)
        for name in _PINOCCHIO_ATTRIBUTES:   # made again with these parameters when asked
            self.__dict__.pop(name, None)
        st = type(self)._structure
        self._frame_ids = [st.frame_names.index(f) for f in self.frames]  # pinocchio's frame ids
        self._p = rigid_body.tree_parameters(
            st.joints, st.frames[self._frame_ids], [p["gravity_x"], p["gravity_y"], p["gravity_z"]],
            p["friction_velocity_scale"], [p[f"{j}.damping"] for j in names],
            [p[f"{j}.friction"] for j in names], [p[f"{j}.effort_limit"] for j in names],
            self._mimics, self._held_joints())
        m = len(self._mimics)
        self._Cq = np.zeros((m, n))
        rigid_body.tree_constraint_jacobian(np.zeros(n), 0.0, self._p, self._Cq)
        self._Cq.flags.writeable = False
        self._effort_limits = tuple(
            (i, p[f"{j}.effort_limit"], f"the effort limit of joint {j!r} (parameter "
             f"'{j}.effort_limit', URDF <limit effort>)")
            for i, j in enumerate(names) if p[f"{j}.effort_limit"] > 0.0)
        self._zero = np.zeros(n)
        self._lower = np.array([self._joint[j].lower for j in names])
        self._upper = np.array([self._joint[j].upper for j in names])
        root, coef, offs = self._root, self._coef, self._offs
        q0 = np.array([p.get(f"{j}.q0", 0.0) for j in names])
        v0 = np.array([p.get(f"{j}.v0", 0.0) for j in names])
        q0 = coef * q0[root] + offs     # a mimic joint follows its joint; others: q0 itself
        v0 = coef * v0[root]
        if self.position_limits:
            for i in self._limited:
                if not self._lower[i] <= q0[i] <= self._upper[i]:
                    raise InvalidInputError(
                        f"parameter {names[i] + '.q0'!r} = {q0[i]!r} is outside the joint's "
                        f"position limits [{self._lower[i]!r}, {self._upper[i]!r}]")
        self._q0, self._v0 = q0, v0
        # the stops' switching functions, compiled (stop_values / stop_screen arguments)
        lim = self._limited
        self._stop_fns = compiled_stop_functions() if len(lim) else None
        self._stop_table = np.concatenate([
            [len(lim), len(self._mimics)], lim, self._lower[lim], self._upper[lim], self._modes,
            self._Cq.reshape(-1)]).astype(float)
        self._z_buffers = (np.zeros(3 * len(lim)), np.zeros(3 * len(lim)))
        self._n_stop_values = n, 3 * len(lim)   # (event_functions' sizes)

    def __getattr__(self, name):
        """pinocchio's model and data of this robot, made on first use (the Python
        equations, /tf): a compiled run that needs none of them never imports pinocchio."""
        if name not in _PINOCCHIO_ATTRIBUTES or "_p" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self.__dict__.update(self._pinocchio_objects())
        return self.__dict__[name]

    def _pinocchio_objects(self):
        pin, p, n = pinocchio(), self.params, self.n_q
        pm = pin.buildModelFromXML(self.robot.normalized)
        pm.gravity.linear = np.array([p["gravity_x"], p["gravity_y"], p["gravity_z"]])
        pm0 = pin.Model(pm)          # zero gravity: (M a)_q
        pm0.gravity.linear = np.zeros(3)
        pd = pm.createData()
        body = pin.FrameType.BODY
        # pinocchio's C++ CRBA fills the upper triangle; its Python binding (pin 3.x/4.x)
        # returns the symmetric matrix: symmetrize only where it does not
        M = pin.crba(pm, pd, pin.randomConfiguration(pm, -np.ones(n), np.ones(n)))
        return {"_pm": pm, "_pd": pd, "_pm0": pm0, "_pd0": pm0.createData(),
                "_joint_frames": tuple((j.parent, j.child, pm.getFrameId(j.parent, body),
                                        pm.getFrameId(j.child, body)) for j in self.robot.joints),
                "_pin": pin, "_crba": pin.crba, "_rnea": pin.rnea,
                "_rnea_derivatives": pin.computeRNEADerivatives,
                "_symmetrize": not np.array_equal(M, M.T)}

    def _group(self, i):
        """Joint i's mimic group: the joints that move with it (an index array)."""
        groups = self.__dict__.get("_groups")
        if groups is None:
            groups = self._groups = [np.flatnonzero(self._root == r) for r in self._root]
        return groups[i]

    def _held_joints(self):
        """The joints the stops hold now (a stop holds its joint's whole mimic group);
        also sets ``_modes`` (per limited joint) and ``_held``."""
        names = self.coordinates
        self._modes = np.array([self.params[f"{names[i]}.stop"] for i in self._limited])
        held = set()
        for r, i in enumerate(self._limited):
            if self._modes[r] != 0.0:
                held.update(self._group(i).tolist())
        self._held = np.array(sorted(held), dtype=int)
        self._held_set = frozenset(self._held.tolist())
        self._event_coords = None   # (event_coordinate's, for these modes)
        table = getattr(self, "_stop_table", None)
        if table is not None:  # the modes in the compiled functions' table
            k = len(self._limited)
            table[2 + 3 * k:2 + 4 * k] = self._modes
        return self._held

    def _set_stop(self, r, mode):
        """Stop r (of the limited joints) to ``mode`` at an event: the parameter (the
        state carries it) and the held flags in p, in place (no new set-up)."""
        i = self._limited[r]
        self.params[f"{self.coordinates[i]}.stop"] = float(mode)
        self._held_joints()
        n = len(self.coordinates)
        flags = held_flags(self._p, n)
        self._p[flags:flags + n] = 0.0
        self._p[flags + self._held] = 1.0

    def initial_state(self):
        held = [self.coordinates[i] for r, i in enumerate(self._limited) if self._modes[r] != 0.0]
        if held:  # the modes are state: the events set them, a restored state carries them
            raise InvalidInputError(
                f"parameter {held[0] + '.stop'!r} = {self.params[held[0] + '.stop']!r}: a stop "
                f"starts free (0) and holds from its first arrival (a joint may start on its "
                f"limit: '{held[0]}.q0' = the limit)")
        return self._q0.copy(), self._v0.copy()

    def input_limits(self):
        """(input index, effort limit, what it is) of each joint whose effort is clipped
        (:class:`cosim.Simulation` says once per joint when a requested effort is)."""
        return self._effort_limits

    # -- equations of motion (pinocchio + the kernels' joint terms) -------------------------
    def use_compiled_kernels(self, on):
        """While a compiled method runs this robot (``on``), M and Q of the Python equations
        (the initial-condition analysis, the stops' events) are the compiled kernels it
        runs (:func:`rigid_body.tree_mass`, :func:`rigid_body.tree_forces`, the same
        numbers as pinocchio's to ~1e-15), so such a run never imports pinocchio;
        otherwise pinocchio's.  Returns the previous setting (to restore it)."""
        previous = self._compiled_terms is not None
        self._compiled_terms = jit.compiled_kernels(KERNELS.all_functions(), "mass", "forces") \
            if on else None
        return previous

    def mass(self, q, t):
        if self._compiled_terms is not None:
            M = np.zeros((self.n_q, self.n_q))
            self._compiled_terms[0](np.ascontiguousarray(q, dtype=float), float(t), self._p, M)
            return M
        M = self._crba(self._pm, self._pd, np.asarray(q, dtype=float))
        if self._symmetrize:
            M = np.triu(M) + np.triu(M, 1).T
        h = self._held
        if len(h):  # held joints: row and column the unit vector (rigid_body.tree_mass)
            M = np.array(M)
            M[h, :] = 0.0
            M[:, h] = 0.0
            M[h, h] = 1.0
        return M

    def _free_forces(self, q, v, u):
        v = np.asarray(v, dtype=float)
        Q = -self._rnea(self._pm, self._pd, np.asarray(q, dtype=float), v, self._zero)
        joint_forces(v, np.asarray(u, dtype=float), self._p, len(Q), Q)
        return Q

    def forces(self, q, v, t, u):
        if self._compiled_terms is not None:
            Q = np.zeros(self.n_q)
            self._compiled_terms[1](np.ascontiguousarray(q, dtype=float),
                                    np.ascontiguousarray(v, dtype=float), float(t),
                                    np.ascontiguousarray(u, dtype=float), self._p, Q)
            return Q
        Q = self._free_forces(q, v, u)
        Q[self._held] = 0.0
        return Q

    def force_jacobians(self, q, v, t, u):
        v = np.asarray(v, dtype=float)
        dq, dv, _ = self._rnea_derivatives(self._pm, self._pd, np.asarray(q, dtype=float), v,
                                           self._zero)
        Qq, Qv = -dq, -dv
        rigid_body.joint_force_slopes(v, self._p, len(v), Qv)
        Qq[self._held, :] = 0.0
        Qv[self._held, :] = 0.0
        return Qq, Qv

    def mass_jacobian_term(self, q, a, t):
        a = np.array(a, dtype=float)
        a[self._held] = 0.0
        dq, _, _ = self._rnea_derivatives(self._pm0, self._pd0, np.asarray(q, dtype=float),
                                          self._zero, a)
        J = np.array(dq)  # pinocchio returns views of its Data
        J[self._held, :] = 0.0
        return J

    # -- mimic constraints (the kernels' functions; C_q constant, C_t = γ = 0) --------------
    def constraints(self, q, t):
        kind = np.asarray(q).dtype
        C = np.zeros(len(self._mimics), dtype=kind if kind.kind in "cO" else float)
        rigid_body.tree_constraints(np.asarray(q, dtype=C.dtype), t, self._p, C)
        return C

    def constraint_jacobian(self, q, t):
        return self._Cq

    def constraint_dt(self, q, t):
        return np.zeros(len(self._mimics))

    def gamma(self, q, v, t):
        return np.zeros(len(self._mimics))

    def constraint_force_jacobian(self, q, lam, t):
        return np.zeros((self.n_q, self.n_q))

    # -- outputs, energy ---------------------------------------------------------------------
    def outputs_qv(self, t, q, v, u):
        """q, v and the frames' poses from pinocchio (the python backend; the compiled
        one runs :func:`rigid_body.tree_outputs`, the same numbers to ~1e-15)."""
        out = [np.asarray(q, dtype=float), np.asarray(v, dtype=float)]
        if self._frame_ids:
            pin = self._pin
            pin.framesForwardKinematics(self._pm, self._pd, np.asarray(q, dtype=float))
            for fid in self._frame_ids:
                pose = self._pd.oMf[fid]
                quat = pin.Quaternion(pose.rotation).coeffs()  # x, y, z, w
                out += [np.array(pose.translation), np.array(quat)]
        return np.concatenate(out)

    def link_transforms(self, q):
        """For every URDF joint (file order, fixed joints too): ``(parent link, child
        link, translation (3,), quaternion x, y, z, w (4,))``, the child link's frame
        in the parent link's at joint positions ``q`` (forward kinematics; what
        robot_state_publisher sends on /tf)."""
        pin, data = self._pin, self._pd
        pin.framesForwardKinematics(self._pm, data, np.asarray(q, dtype=float))
        out = []
        for parent, child, fp, fc in self._joint_frames:
            pose = data.oMf[fp].actInv(data.oMf[fc])
            out.append((parent, child, np.array(pose.translation),
                        np.array(pin.Quaternion(pose.rotation).coeffs())))
        return out

    def potential_energy(self, q, t=0.0):
        return float(self._pin.computePotentialEnergy(self._pm, self._pd,
                                                        np.asarray(q, dtype=float)))

    # -- position-limit stops (events) ---------------------------------------------------------
    def stop_reactions(self, q, v, t, u):
        """The reaction (N·m or N, positive along the joint) of every limited joint's stop
        that holds now (0 for the others): the multipliers r of the holds in
        [M C_qᵀ −E; C_q 0 0; −Eᵀ 0 0] [q''; λ; r] = [Q; 0; 0], E the unit columns of the
        held stops' joints (the unheld equations: pinocchio's M and Q)."""
        k = len(self._limited)
        out = np.zeros(k)
        active = np.flatnonzero(self._modes != 0.0)
        if not len(active):
            return out
        q = np.asarray(q, dtype=float)
        n, m, s = self.n_q, len(self._mimics), len(active)
        M = self._crba(self._pm, self._pd, q)
        if self._symmetrize:
            M = np.triu(M) + np.triu(M, 1).T
        K = np.zeros((n + m + s, n + m + s))
        K[:n, :n] = M
        K[:n, n:n + m], K[n:n + m, :n] = self._Cq.T, self._Cq
        for c, r in enumerate(active):
            K[self._limited[r], n + m + c] = K[n + m + c, self._limited[r]] = -1.0
        rhs = np.zeros(n + m + s)
        rhs[:n] = self._free_forces(q, v, u)
        out[active] = np.linalg.solve(K, rhs)[n + m:]
        return out

    def event_functions(self, t, y, u):
        if self._stop_fns is not None and self._stop_fns[0] is not stop_values:
            n, k3 = self._n_stop_values
            z = np.empty(k3)
            y = np.ascontiguousarray(y, dtype=float)
            self._stop_fns[0](y[:n], y[n:], np.ascontiguousarray(u, dtype=float), self._p,
                              self._stop_table, z)
            return z
        return self.event_functions_reference(t, y, u)

    def quiet_step(self, x1, x0, start, h, u, z_old):
        """For the stepper's fast path (one compiled call without event checks) after a
        step of length h from y0 = x0[start:start + 2n] to y1 (x1 likewise): ``(quiet,
        z)`` with z the switching functions at y1 and ``quiet`` True when no stop
        can have acted in the step (:func:`stop_screen`); else the stepper takes the
        step again on its event path.  Also asked with h = 0 and x0 = x1 when the
        inputs change (u the new ones): quiet when they move no switching function
        across zero (a holding stop's reaction depends on them)."""
        z = self._z_buffers[0]
        if z is z_old:  # (the stepper keeps the last z it was given: write the other one)
            z = self._z_buffers[1]
        return self._stop_fns[1](x1, x0, start, h, u, self._p, self._stop_table, z_old, z), z

    def event_coordinate(self, index):
        """An arrival of a joint no stop holds: q_i − lower or upper − q_i (the rounding
        of :func:`stop_values` and :meth:`event_functions_reference`); a held joint's
        arrivals (1) and the releases: None.  (Per mode: made again when a stop changes.)"""
        coords = self._event_coords
        if coords is None:
            k, table = len(self._limited), self._stop_table
            held = self._held_set
            lim = [int(i) for i in self._limited]
            coords = self._event_coords = tuple(
                [None if i in held else (i, float(table[2 + k + r]), 1.0) for r, i in enumerate(lim)]
                + [None if i in held else (i, float(table[2 + 2 * k + r]), -1.0) for r, i in enumerate(lim)]
                + [None] * k)
        return coords[index]

    def inputs_move_events(self):
        """Whether a new input can move a switching function: only a holding stop's
        reaction depends on the efforts (the arrivals are positions)."""
        return len(self._held) > 0

    def event_functions_reference(self, t, y, u):
        """:meth:`event_functions` on pinocchio (the reference of the compiled ones)."""
        n, idx = self.n_q, self._limited
        q = y[:n]
        lower, upper = q[idx] - self._lower[idx], self._upper[idx] - q[idx]
        release = np.ones(len(idx))
        if len(self._held):
            held = np.isin(idx, self._held)  # a held joint cannot arrive anywhere
            lower[held] = upper[held] = 1.0
            r = self.stop_reactions(q, y[n:], t, u)
            on = self._modes != 0.0
            release[on] = -self._modes[on] * r[on]  # > 0 while the stop pushes
        return np.concatenate([lower, upper, release])

    def _onto_limit(self, y, i, limit):
        """q_i onto the limit, its mimic group kept consistent."""
        group = self._group(i)
        if self._coef[i] != 0.0 and len(group) > 1:
            r = self._root[i]
            y[r] = (limit - self._offs[i]) / self._coef[i]
            y[group] = self._coef[group] * y[r] + self._offs[group]
        y[i] = limit

    def apply_event(self, index, t, y, u):
        """:meth:`apply_events` of the one event ``index``."""
        return self.apply_events((index,), t, y, u)

    def apply_events(self, indices, t, y, u):
        """The events ``indices`` located at one instant, in index order, each on the
        state the previous ones left.

        Arrival (index < 2k): q onto the limit and the impulse Λ along the joint that
        makes its velocity −e × its velocity before (Newton's law): v⁺ = v⁻ + w Λ with w
        the response to a unit impulse, [M C_qᵀ; C_q 0] [w; μ] = [e_i; 0],
        Λ = −(1 + e) v⁻_i / w_i, so the other joints react through M and the
        constraints, and restitution 1 keeps the kinetic energy; e = 0 and the stop
        holds when e|v⁻_i| <= stop_hold_velocity and the load pushes into it.  An
        arrival after an impulse of this instant is satisfied by it (no impulse of its
        own) when that impulse struck its mimic group (the group moves as one: the
        Panda's two fingers at their upper limits take one impact) or left its joint
        moving away from the limit.
        Release (index >= 2k): the stop lets go (mode 0); q stays on the limit."""
        y = np.array(y, dtype=float)
        struck = []  # the mimic groups (roots) an impulse of this instant struck
        for index in indices:
            y = self._jump(index, t, y, u, struck)
        return y

    def _jump(self, index, t, y, u, struck):
        k = len(self._limited)
        r = index % k
        i = self._limited[r]
        n = self.n_q
        if index >= 2 * k:
            mode = self._modes[r]
            self._set_stop(r, 0.0)
            if mode != 0.0:
                self._onto_limit(y, i, self._lower[i] if mode < 0 else self._upper[i])
            return y
        if i in self._held_set:  # its group is held by another stop already
            return y
        side = -1.0 if index < k else 1.0
        self._onto_limit(y, i, self._lower[i] if side < 0 else self._upper[i])
        q, v = y[:n], y[n:]
        if struck and (self._root[i] in struck or side * v[i] < 0.0):
            return y  # satisfied by this instant's impulse
        m = len(self._mimics)
        K = np.zeros((n + m, n + m))
        K[:n, :n] = self.mass(q, t)
        K[:n, n:], K[n:, :n] = self._Cq.T, self._Cq
        rhs = np.zeros(n + m)
        rhs[i] = 1.0
        w = np.linalg.solve(K, rhs)[:n]
        e = self.params["restitution"]
        if e * abs(v[i]) <= self.params["stop_hold_velocity"]:
            e = 0.0
        impulse = -(1.0 + e) * v[i] / w[i]
        y[n:] = v + w * impulse
        struck.append(self._root[i])
        if e == 0.0:
            y[n + i] = 0.0  # exactly at rest (the group follows within roundoff)
            y[n + self._group(i)] = 0.0
            self._set_stop(r, side)
            # its release function, −mode × the reaction (compiled where the model is:
            # no pinocchio in a compiled run's event)
            if self.event_functions(t, y, u)[2 * k + r] <= 0.0:
                self._set_stop(r, 0.0)  # the load pulls away: the joint leaves at once
        return y


# -- the stops' switching functions, compiled (the stepper's check after each fast call) -------
@jit.kernel_helper
def stop_values(q, v, u, p, table, z):
    """The switching functions of :meth:`URDFModel.event_functions` into z (3k of them
    for the k limited joints; ``table``: :meth:`URDFModel._stop_table`): the reactions
    of the holding stops from the rigid-body kernels (the model without holds:
    ``_crba`` and ``_rnea`` before the held flags of p apply) instead of pinocchio,
    the hold's system solved by the small dense LU of the compiled methods
    (:mod:`cosim.integrators.dense_lu`, no LAPACK call); the same numbers to ~1e-15."""
    n, k, m = q.shape[0], int(table[0]), int(table[1])
    lim, low, up, mode, cq = 2, 2 + k, 2 + 2 * k, 2 + 3 * k, 2 + 4 * k
    flags = held_flags(p, n)
    holding = 0
    for r in range(k):
        i = int(table[lim + r])
        if p[flags + i] != 0.0:  # a held joint cannot arrive anywhere
            z[r] = 1.0
            z[k + r] = 1.0
        else:
            z[r] = q[i] - table[low + r]
            z[k + r] = table[up + r] - q[i]
        z[2 * k + r] = 1.0
        if table[mode + r] != 0.0:
            holding += 1
    if holding == 0:
        return
    W, B, C, zero = _tree_work(q, p, n)  # the work arrays in p's kinematics cache
    M = np.zeros((n, n))
    _crba(p, n, W, B, C, M)
    Q = np.zeros(n)
    _rnea(p, n, W, B, v, zero, p[1], p[2], p[3], Q)
    for i in range(n):
        Q[i] = -Q[i]
    joint_forces(v, u, p, n, Q)
    N = n + m + holding
    K, rhs = np.zeros((N, N)), np.zeros(N)
    for i in range(n):
        rhs[i] = Q[i]
        for j in range(n):
            K[i, j] = M[i, j]
        for c in range(m):
            K[i, n + c] = table[cq + c * n + i]
            K[n + c, i] = table[cq + c * n + i]
    c = n + m
    for r in range(k):
        if table[mode + r] != 0.0:
            i = int(table[lim + r])
            K[i, c] = -1.0
            K[c, i] = -1.0
            c += 1
    piv = np.zeros(N, dtype=np.int64)
    if lu_factor_inplace(K, piv) != 0:
        raise np.linalg.LinAlgError("the holding stops' reaction matrix is singular")
    lu_solve_inplace(K, piv, rhs)
    c = n + m
    for r in range(k):
        if table[mode + r] != 0.0:
            z[2 * k + r] = -table[mode + r] * rhs[c]  # > 0 while the stop pushes
            c += 1


def stop_screen(x1, x0, start, h, u, p, table, z_old, z):
    """After a step from y0 to y1 (y = x[start:start + 2n]) taken without looking at
    the stops: z = the switching functions at y1 (:func:`stop_values`), and True
    when none changed sign or is zero at either end (the event path's test at the
    ends of an integrator step: a joint that passes a limit and comes back within
    one integrator step is not seen; zero at the start, just after an event: the
    event path looks closer).  ``x0``, ``h``: the step's start and length (unused
    by this test)."""
    n = int(p[0])
    stop_values(x1[start:start + n], x1[start + n:start + 2 * n], u, p, table, z)
    for r in range(z.shape[0]):
        if not (z[r] > 0.0 and z_old[r] > 0.0):
            return False
    return True


_compiled_stops = {}


def compiled_stop_functions():
    """(stop_values, stop_screen) compiled with numba (once per machine, cached on
    disk), or the Python ones when numba is not importable."""
    if "fns" not in _compiled_stops:
        if not jit.numba_available():
            _compiled_stops["fns"] = (stop_values, stop_screen)
        else:
            # pasted with every helper they call (rigid_body, dense_lu) into one generated
            # module: the disk cache is keyed on all of that source
            values, screen = jit.pasted_dispatchers(
                (stop_values, stop_screen, lu_factor_inplace, lu_solve_inplace), "stops",
                "urdf_stops")[:2]
            a = "float64[::1]"
            with jit.compiling("the position-limit stops of URDF robots", "about a minute"):
                # values first: compiled as stop_screen's callee it would be cached under
                # its argument types only, and missed by this compile(signature) in the
                # next process (2.5 s of compiling on every first run after the set-up)
                values.compile(f"void({a}, {a}, {a}, {a}, {a}, {a})")
                screen.compile(f"boolean({a}, {a}, int64, float64, {a}, {a}, {a}, {a}, {a})")
            _compiled_stops["fns"] = (values, screen)
    return _compiled_stops["fns"]


def _default_q0(joint):
    if joint.lower <= 0.0 <= joint.upper and not (joint.lower == 0.0 or joint.upper == 0.0):
        return 0.0
    if math.isinf(joint.lower):
        return 0.0
    return 0.5 * (joint.lower + joint.upper)


def _mimic_chains(names, joints):
    """Per joint i: (root r, c, o) with q_i = c q_r + o on the mimic constraints (r = i,
    c = 1, o = 0 for a joint that mimics none; chains followed to their end)."""
    index = {j: i for i, j in enumerate(names)}
    root, coef, offs = np.arange(len(names)), np.ones(len(names)), np.zeros(len(names))
    for i, j in enumerate(names):
        c, o, k = 1.0, 0.0, joints[j]
        while k.mimic is not None:  # urdf_parse refused cycles
            c, o = c * k.multiplier, c * k.offset + o
            k = joints[k.mimic]
        root[i], coef[i], offs[i] = index[k.name], c, o
    return root, coef, offs


def _unique(names, robot):
    seen = set()
    for n in names:
        if n in seen:
            raise InvalidInputError(f"URDF robot {robot!r}: the name {n!r} is used twice "
                                    f"(joints, inputs, outputs and parameters must be unique)")
        seen.add(n)


def _build_structure(robot):
    """:func:`urdf_structure.from_pinocchio` of ``robot``'s URDF text (imports pinocchio)."""
    pin = pinocchio()
    try:
        pm = pin.buildModelFromXML(robot.normalized)
    except Exception as exc:  # noqa: BLE001 - urdfdom/pinocchio's message names the element
        raise InvalidInputError(f"malformed URDF {robot.name!r}: {exc}") from None
    st = urdf_structure.from_pinocchio(pin, pm, robot.name)
    if set(st.joint_names) - {j.name for j in robot.joints}:
        raise InvalidInputError(f"URDF robot {robot.name!r}: pinocchio built {pm.nq} coordinates "
                                f"for joints {list(st.joint_names)} (expected one per movable joint)")
    return st


def urdf_model_class(text, frames=(), position_limits=True):
    """The :class:`URDFModel` subclass of the robot described by ``text`` (cached)."""
    robot = urdf_parse.parse(text)
    frames = tuple(str(f) for f in (frames or ()))
    key = (robot.sha256, frames, bool(position_limits))
    cls = _classes.get(key)
    if cls is not None:
        return cls
    st = urdf_structure.structure(robot, lambda: _build_structure(robot))
    names = st.joint_names
    joints = {j.name: j for j in robot.joints}
    for f in frames:
        if f not in st.frame_names:
            raise InvalidInputError(f"URDF robot {robot.name!r} has no frame {f!r} "
                                    f"(links and joints: {', '.join(st.frame_names[1:])})")
    unit = {"revolute": ("rad", "N.m"), "continuous": ("rad", "N.m"), "prismatic": ("m", "N")}
    index = {j: i for i, j in enumerate(names)}
    mimics = tuple((index[j], index[joints[j].mimic], joints[j].multiplier, joints[j].offset)
                   for j in names if joints[j].mimic is not None)
    root, coef, offs = _mimic_chains(names, joints)
    params = []
    for j in names:
        ju = joints[j]
        pos, eff = unit[ju.type]
        if ju.mimic is None:
            params += [
                Parameter(f"{j}.q0", _default_q0(ju), pos, f"initial position of joint {j}"),
                Parameter(f"{j}.v0", 0.0, pos + "/s", f"initial velocity of joint {j}")]
        params += [
            Parameter(f"{j}.damping", ju.damping, eff + ".s/" + pos,
                      f"viscous damping of joint {j} (URDF <dynamics damping>)", tunable=True),
            Parameter(f"{j}.friction", ju.friction, eff,
                      f"Coulomb friction of joint {j} (URDF <dynamics friction>, smoothed)",
                      tunable=True),
            Parameter(f"{j}.effort_limit", ju.effort, eff,
                      f"effort saturation of joint {j} (URDF <limit effort>; 0 = none)",
                      tunable=True),
        ]
    params += [
        Parameter("gravity_x", 0.0, "m/s2", "gravity along the root link's x", tunable=True),
        Parameter("gravity_y", 0.0, "m/s2", "gravity along the root link's y", tunable=True),
        Parameter("gravity_z", -9.81, "m/s2", "gravity along the root link's z", tunable=True),
        Parameter("friction_velocity_scale", 1e-3, "1",
                  "velocity scale v_s of the smoothed Coulomb friction f*tanh(v/v_s)"),
        Parameter("restitution", 0.5, "1", "restitution coefficient at a position limit"),
    ]
    limited = tuple(i for i, j in enumerate(names)
                    if position_limits and math.isfinite(joints[j].lower))
    if limited:
        params += [Parameter("stop_hold_velocity", 1e-3, "rad/s or m/s",
                             "a stop holds its joint when the rebound speed restitution*|v| "
                             "is at most this")]
        params += [Parameter(f"{names[i]}.stop", 0.0, "1",
                             f"stop of joint {names[i]}: 0 free, -1 held at the lower limit, "
                             f"+1 at the upper (set by the limit events; part of the state)")
                   for i in limited]
    outputs = [Signal(f"{j}_position", unit[joints[j].type][0], f"position of joint {j}")
               for j in names]
    outputs += [Signal(f"{j}_velocity", unit[joints[j].type][0] + "/s", f"velocity of joint {j}")
                for j in names]
    for f in frames:
        outputs += [Signal(f"{f}_{c}", "m", f"{c} of frame {f} in the root frame") for c in "xyz"]
        outputs += [Signal(f"{f}_{c}", "1", f"orientation quaternion {c} of frame {f}")
                    for c in ("qx", "qy", "qz", "qw")]
    inputs = [Signal(j, unit[joints[j].type][1], f"effort of joint {j}") for j in names]
    events = tuple(Event(f"{names[i]}_lower_limit", direction=-1) for i in limited) + \
        tuple(Event(f"{names[i]}_upper_limit", direction=-1) for i in limited) + \
        tuple(Event(f"{names[i]}_stop_release", direction=-1) for i in limited)
    _unique([s.name for s in inputs + outputs] + [p.name for p in params], robot.name)
    attrs = {
        "name": robot.name, "robot": robot, "frames": frames,
        "position_limits": bool(position_limits), "source_digest": robot.sha256,
        "description": f"robot {robot.name!r} from URDF (pinocchio), {len(names)} joints",
        "coordinates": names, "parameters": tuple(params),
        "constraint_names": tuple(f"{names[i]}_mimic" for i, _, _, _ in mimics),
        "_mimics": mimics, "_root": root, "_coef": coef, "_offs": offs, "inputs": tuple(inputs),
        "outputs": tuple(outputs), "events": events, "parameter_ranges": {
            **{p.name: NONNEGATIVE for p in params
               if p.name.endswith((".damping", ".friction", ".effort_limit"))},
            **{f"{names[i]}.stop": STOP_MODE for i in limited},
            "restitution": UNIT_INTERVAL, "friction_velocity_scale": POSITIVE,
            "stop_hold_velocity": NONNEGATIVE},
        "_structure": st, "_limited": np.array(limited, dtype=int), "_joint": joints,
        "coordinate_scale": 1.0,
    }
    ident = "".join(c if c.isalnum() or c == "_" else "_" for c in robot.name) or "robot"
    if not (ident[0].isalpha() or ident[0] == "_"):
        ident = "_" + ident
    cls = type(ident, (URDFModel,), attrs)
    cls.__module__ = __name__
    _classes[key] = cls
    return cls


# the Python methods the compiled kernels describe (checked against each other in tests)
URDFModel.kernel_reference = URDFModel


def load_urdf(path, frames=(), position_limits=True):
    """The model class of a URDF file (a path the operator chose)."""
    return urdf_model_class(urdf_parse.read_file(path), frames, position_limits)


def model_from_spec(spec):
    """The class of a mapping spec ``{"urdf_text": ..., "frames": [...], "position_limits": b}``."""
    unknown = set(spec) - {"urdf_text", "frames", "position_limits"}
    if unknown:
        raise UnknownModelError(f"URDF model spec: unknown key(s) {sorted(unknown)} "
                                f"(keys: urdf_text, frames, position_limits)")
    frames = spec.get("frames") or ()
    if isinstance(frames, str):
        frames = [f for f in frames.split(",") if f.strip()]
    if not isinstance(frames, (list, tuple)) or not all(isinstance(f, str) for f in frames):
        raise InvalidInputError(f"URDF model spec: 'frames' must be a list of names, "
                                f"got {frames!r}")
    limits = spec.get("position_limits", True)
    if not isinstance(limits, bool):
        raise InvalidInputError(f"URDF model spec: 'position_limits' must be true or false, "
                                f"got {limits!r}")
    return urdf_model_class(spec.get("urdf_text"), [f.strip() for f in frames], limits)


def example_robot_path(relative="panda_description/urdf/panda.urdf"):
    """Path of a URDF shipped by PyPI ``example-robot-data`` (installed into pinocchio's
    cmeel prefix, ``share/example-robot-data/robots/``)."""
    from importlib.util import find_spec
    from pathlib import Path

    spec = find_spec("pinocchio")   # where it is installed, without importing it
    if spec is None or not spec.origin:
        pinocchio()                 # the error naming the extra
    for parent in Path(spec.origin).resolve().parents:
        path = parent / "share" / "example-robot-data" / "robots" / relative
        if path.is_file():
            return path
    raise UnknownModelError(f"example-robot-data file {relative!r} not found next to pinocchio "
                            f"({INSTALL_HINT})")
