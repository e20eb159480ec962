"""What pinocchio builds from a URDF that the compiled kernels need, kept per URDF text.

A URDF robot's compiled kernels read its tree from the flat ``p``
(:func:`cosim.models.rigid_body.tree_parameters`): per movable joint its parent,
type, axis, placement and the link's inertia as pinocchio's URDF parser builds them
(links of fixed joints merged), and the output frames' placements.  Building that
needs pinocchio, whose import alone costs a warm start about as much as everything
else of a new ``Simulation`` of a library model.  So the table is built once per URDF
text and pinocchio version, checked (one-dof joints, parents first, a positive
definite mass matrix), and kept as an ``.npz`` (no pickle) in the private compile
cache folder; a later process reads it back, checks its shape and values, and
imports pinocchio only where a Python method needs it (the python backend, /tf).
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from typing import NamedTuple

import numpy as np

from ..errors import InvalidInputError

FORMAT = 1   # of the file below; a new one makes new files
# per joint: parent (-1: the base), type (0 revolute, 1 prismatic), unit axis (3),
# placement in the parent joint's frame (rotation row-major 9, translation 3), the
# link's mass, centre of mass (3) and rotational inertia about it (9, row-major)
JOINT_COLUMNS = 30
# per frame: parent joint (-1: the base), placement in it (rotation 9, translation 3)
FRAME_COLUMNS = 13
MAX_NAMES = 100_000   # a stored file larger than any URDF the parser accepts is refused


class RobotStructure(NamedTuple):
    joint_names: tuple      # the movable joints, pinocchio's order (parents first)
    joints: np.ndarray      # (n, JOINT_COLUMNS)
    frame_names: tuple      # every frame of pinocchio's model (its frame ids: the index)
    frames: np.ndarray      # (F, FRAME_COLUMNS)


def from_pinocchio(pin, pm, robot_name):
    """The structure of pinocchio's model ``pm`` of URDF robot ``robot_name``, or an
    InvalidInputError naming what the kernels cannot run (not a one-dof revolute or
    prismatic joint, a joint before its parent, a joint moving no mass)."""
    n = pm.njoints - 1
    names = tuple(pm.names[1:])
    if pm.nq != n or pm.nv != n:
        raise InvalidInputError(f"URDF robot {robot_name!r}: pinocchio built {pm.nq} coordinates "
                                f"for joints {list(names)} (expected one per movable joint)")
    joints = np.zeros((n, JOINT_COLUMNS))
    q0 = np.zeros(pm.nq)
    for i in range(n):
        joint = pm.joints[i + 1]
        if joint.nq != 1 or joint.nv != 1:
            raise InvalidInputError(f"joint {names[i]!r} ({joint.shortname()}) is not a one-dof "
                                    f"revolute or prismatic joint")
        data = joint.createData()
        joint.calc(data, q0)
        S = np.array(data.S).reshape(6)  # (linear, angular) in the joint frame
        lin, ang = S[:3], S[3:]
        revolute = bool(np.any(ang))
        axis = ang if revolute else lin
        if (revolute and np.any(lin)) or abs(np.linalg.norm(axis) - 1.0) > 1e-12:
            raise InvalidInputError(f"joint {names[i]!r} ({joint.shortname()}): motion subspace "
                                    f"{S} is not a unit rotation or translation")
        if not pm.parents[i + 1] <= i:  # the kernels' recursions need parents first
            raise InvalidInputError(f"joint {names[i]!r} comes before its parent")
        placement, inertia = pm.jointPlacements[i + 1], pm.inertias[i + 1]
        joints[i] = np.concatenate([
            [pm.parents[i + 1] - 1, 0.0 if revolute else 1.0], axis,
            np.asarray(placement.rotation).reshape(9), placement.translation,
            [inertia.mass], inertia.lever, np.asarray(inertia.inertia).reshape(9)])
    M = pin.crba(pm, pm.createData(), pin.neutral(pm))
    M = np.triu(M) + np.triu(M, 1).T
    try:
        np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        worst = names[int(np.argmin(np.diag(M)))]
        raise InvalidInputError(
            f"URDF robot {robot_name!r}: the mass matrix is singular (joint {worst!r} moves "
            f"no mass or inertia about its axis)") from None
    frames = np.array([np.concatenate([[f.parentJoint - 1], np.asarray(f.placement.rotation).reshape(9),
                                       f.placement.translation]) for f in pm.frames])
    return RobotStructure(names, joints, tuple(f.name for f in pm.frames), frames)


def _pinocchio_version():
    from importlib import metadata  # noqa: PLC0415
    try:
        return metadata.version("pin")
    except metadata.PackageNotFoundError:
        return None


def _path(robot):
    from .. import jit  # noqa: PLC0415
    folder = jit.cache_dir()
    version = _pinocchio_version()
    if not folder or version is None:
        return None
    key = hashlib.sha256(f"{FORMAT}\n{version}\n{robot.sha256}".encode()).hexdigest()[:32]
    return os.path.join(folder, "urdf", key + ".npz")


def _read(path, robot):
    """The stored structure, or None when it is missing or not one this module wrote
    for ``robot`` (wrong keys, kinds, shapes, non-finite values, other joints)."""
    try:
        with np.load(path, allow_pickle=False) as f:
            if sorted(f.files) != ["frame_names", "frames", "joint_names", "joints"]:
                return None
            names, joints, frame_names, frames = (f["joint_names"], f["joints"], f["frame_names"],
                                                  f["frames"])
    except (OSError, ValueError, EOFError):
        return None
    n, nf = names.shape[0] if names.ndim == 1 else -1, frame_names.shape[0] if frame_names.ndim == 1 else -1
    if (names.dtype.kind != "U" or frame_names.dtype.kind != "U" or not 0 < n <= MAX_NAMES
            or not 0 < nf <= MAX_NAMES or joints.dtype != np.float64 or frames.dtype != np.float64
            or joints.shape != (n, JOINT_COLUMNS) or frames.shape != (nf, FRAME_COLUMNS)
            or not np.all(np.isfinite(joints)) or not np.all(np.isfinite(frames))):
        return None
    names = tuple(str(x) for x in names)
    if not set(names) <= {j.name for j in robot.joints}:
        return None
    return RobotStructure(names, joints, tuple(str(x) for x in frame_names), frames)


def _write(path, st):
    """Store ``st`` (atomically: a file written whole, then renamed); a folder that
    cannot take it leaves the next process to build it again."""
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, joint_names=np.array(st.joint_names, dtype=str), joints=st.joints,
                         frame_names=np.array(st.frame_names, dtype=str), frames=st.frames)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


def structure(robot, build):
    """``robot``'s structure: read back from the cache folder, else ``build()`` (which
    imports pinocchio and returns :func:`from_pinocchio`'s result) and stored."""
    path = _path(robot)
    st = _read(path, robot) if path and os.path.exists(path) else None
    if st is None:
        st = build()
        if path:
            _write(path, st)
    return st
