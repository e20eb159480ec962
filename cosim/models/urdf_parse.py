"""URDF text checked before pinocchio sees it (DESIGN.md "Trust boundaries").

A URDF is untrusted input (a ROS ``robot_description`` from any peer, a file a
user downloaded).  :func:`parse` bounds its size, refuses DTDs and entities
(nothing expands), checks what the dynamics need and returns a
:class:`RobotDescription`: the robot's name, its joints in file order, the
SHA-256 of the text, and a normalised URDF for pinocchio in which
``continuous`` joints are ``revolute`` joints without position limits
(pinocchio would give a continuous joint two coordinates, cos θ and sin θ;
joint coordinates here are one angle per revolute joint).

Every rejection is one :class:`~cosim.errors.InvalidInputError` naming the
element: malformed XML, an unsupported joint type (``floating``, ``planar``),
a movable joint that moves no mass (a link without ``<inertial>`` and nothing
with mass below it — a zero-mass chain makes M singular), a negative or
non-finite mass or inertia, a missing parent/child link, a ``<mimic>`` that
names no movable joint or closes a cycle of mimic joints.  ``<visual>`` and
``<collision>`` (meshes) are ignored: the dynamics do not need them.
"""
from __future__ import annotations

import hashlib
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from ..errors import InvalidInputError

MAX_URDF_BYTES = 4 * 2 ** 20   # a large robot's URDF is ~100 kB
MAX_JOINTS = 256               # bounds M (n x n) and the parameter table
MAX_LINKS = MAX_JOINTS + 1     # a tree: one more link than joints
MAX_DEPTH = 32                 # element nesting (robot > link > visual > geometry > mesh: 5)
MAX_ELEMENTS = 50_000          # all elements (a robot with meshes and sensors: a few thousand)
MAX_NAME = 256                 # characters of a name (robot, link, joint) or a link reference
SUPPORTED = ("revolute", "continuous", "prismatic", "fixed")
UNSUPPORTED = ("floating", "planar")


@dataclass(frozen=True)
class Joint:
    name: str
    type: str                 # revolute / continuous / prismatic / fixed
    parent: str
    child: str
    lower: float              # position limits (±inf: none)
    upper: float
    effort: float             # 0: no saturation
    damping: float
    friction: float
    mimic: str | None = None        # URDF <mimic joint=...>: q = multiplier * q_mimic + offset
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class RobotDescription:
    name: str
    sha256: str
    joints: tuple             # Joint, file order
    normalized: str           # URDF text given to pinocchio
    text: str                 # the original text

    @property
    def movable(self):
        return tuple(j for j in self.joints if j.type != "fixed")


def _float(element, attr, what, default=None):
    raw = element.get(attr)
    if raw is None:
        if default is None:
            raise InvalidInputError(f"URDF {what}: missing attribute {attr!r}")
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InvalidInputError(f"URDF {what}: {attr}={raw!r} is not a number") from None
    if not math.isfinite(value):
        raise InvalidInputError(f"URDF {what}: {attr}={raw!r} must be finite")
    return value


def _text(source):
    if isinstance(source, bytes):
        if len(source) > MAX_URDF_BYTES:
            raise InvalidInputError(f"URDF of {len(source)} bytes is larger than the limit "
                                    f"{MAX_URDF_BYTES}")
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInputError(f"URDF is not UTF-8 text: {exc}") from None
    if not isinstance(source, str):
        raise InvalidInputError(f"URDF must be text, got {type(source).__name__}")
    if len(source.encode("utf-8")) > MAX_URDF_BYTES:
        raise InvalidInputError(f"URDF of {len(source.encode('utf-8'))} bytes is larger than "
                                f"the limit {MAX_URDF_BYTES}")
    return source


def read_file(path):
    """The text of a URDF file the operator named (size checked before reading)."""
    import os

    try:
        size = os.path.getsize(path)
        if size > MAX_URDF_BYTES:
            raise InvalidInputError(f"URDF file {str(path)!r} has {size} bytes, more than the "
                                    f"limit {MAX_URDF_BYTES}")
        with open(path, "rb") as fh:
            data = fh.read(MAX_URDF_BYTES + 1)
    except OSError as exc:
        raise InvalidInputError(f"cannot read URDF file {str(path)!r}: {exc.strerror}") from None
    return _text(data)


def parse(source):
    """Check a URDF (text or bytes) and return its :class:`RobotDescription`."""
    text = _text(source)
    upper = text.upper()
    if "<!DOCTYPE" in upper or "<!ENTITY" in upper:
        raise InvalidInputError("URDF: a DOCTYPE/ENTITY declaration is not accepted "
                                "(nothing is expanded in an untrusted description)")
    _check_structure(text)  # depth, element count and name lengths, before any tree is built
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise InvalidInputError(f"malformed URDF: {exc}") from None
    if root.tag != "robot":
        raise InvalidInputError(f"malformed URDF: the root element is <{root.tag}>, not <robot>")
    name = root.get("name") or "robot"

    links, masses = {}, {}
    found = root.findall("link")
    if len(found) > MAX_LINKS:
        raise InvalidInputError(f"URDF robot {_short(name)} has {len(found)} links, more than the limit "
                                f"{MAX_LINKS}")
    for link in found:
        lname = link.get("name")
        if not lname:
            raise InvalidInputError("URDF: a <link> has no name")
        if lname in links:
            raise InvalidInputError(f"URDF: link {lname!r} is defined twice")
        links[lname] = link
        masses[lname] = _link_mass(link, lname)
    if not links:
        raise InvalidInputError(f"URDF robot {name!r} has no <link>")

    joints, children = [], {}
    for el in root.findall("joint"):
        jname = el.get("name")
        if not jname:
            raise InvalidInputError("URDF: a <joint> has no name")
        jtype = el.get("type", "")
        what = f"joint {jname!r}"
        if jtype in UNSUPPORTED:
            raise InvalidInputError(
                f"URDF {what} has type {jtype!r}: not supported (fixed-base trees of "
                f"{', '.join(SUPPORTED)} joints)")
        if jtype not in SUPPORTED:
            raise InvalidInputError(f"URDF {what} has unknown type {jtype!r} "
                                    f"(supported: {', '.join(SUPPORTED)})")
        parent, child = el.find("parent"), el.find("child")
        if parent is None or child is None or not parent.get("link") or not child.get("link"):
            raise InvalidInputError(f"URDF {what} needs <parent link=...> and <child link=...>")
        for role, lname in (("parent", parent.get("link")), ("child", child.get("link"))):
            if lname not in links:
                raise InvalidInputError(f"URDF {what}: {role} link {lname!r} is not defined")
        lower, upper, effort = -math.inf, math.inf, 0.0
        limit = el.find("limit")
        if jtype in ("revolute", "prismatic"):
            if limit is None:
                raise InvalidInputError(f"URDF {what} ({jtype}) needs a <limit> element")
            lower = _float(limit, "lower", what + " <limit>", 0.0)
            upper = _float(limit, "upper", what + " <limit>", 0.0)
            if not lower < upper:
                raise InvalidInputError(f"URDF {what} <limit>: lower={lower!r} must be < "
                                        f"upper={upper!r}")
        if limit is not None and jtype != "fixed":
            effort = _float(limit, "effort", what + " <limit>", 0.0)
            if effort < 0:
                raise InvalidInputError(f"URDF {what} <limit>: effort={effort!r} must be >= 0")
        damping = friction = 0.0
        dyn = el.find("dynamics")
        if dyn is not None and jtype != "fixed":
            damping = _float(dyn, "damping", what + " <dynamics>", 0.0)
            friction = _float(dyn, "friction", what + " <dynamics>", 0.0)
            if damping < 0 or friction < 0:
                raise InvalidInputError(f"URDF {what} <dynamics>: damping and friction must be "
                                        f">= 0, got {damping!r}, {friction!r}")
        mimic, multiplier, offset = None, 1.0, 0.0
        mim = el.find("mimic")
        if mim is not None:
            if jtype == "fixed":
                raise InvalidInputError(f"URDF {what} is fixed: <mimic> applies to a movable joint")
            mimic = mim.get("joint")
            if not mimic:
                raise InvalidInputError(f"URDF {what} <mimic> needs joint=...")
            multiplier = _float(mim, "multiplier", what + " <mimic>", 1.0)
            offset = _float(mim, "offset", what + " <mimic>", 0.0)
        if child.get("link") in children:
            raise InvalidInputError(
                f"URDF {what}: link {child.get('link')!r} is already the child of joint "
                f"{children[child.get('link')]!r} (closed loops are not supported)")
        children[child.get("link")] = jname
        joints.append(Joint(jname, jtype, parent.get("link"), child.get("link"),
                            lower, upper, effort, damping, friction, mimic, multiplier, offset))
    if len(joints) > MAX_JOINTS:
        raise InvalidInputError(f"URDF robot {name!r} has {len(joints)} joints, more than "
                                f"the limit {MAX_JOINTS}")
    if len({j.name for j in joints}) != len(joints):
        raise InvalidInputError(f"URDF robot {name!r} has two joints of the same name")
    _check_mimics(joints)
    roots = [lname for lname in links if lname not in children]
    if len(roots) != 1:
        shown = ", ".join(_short(r) for r in roots[:5])
        shown += f", ... ({len(roots)} in all)" if len(roots) > 5 else ""
        raise InvalidInputError(f"URDF robot {_short(name)} must be one tree with one root link, "
                                f"found roots [{shown}]")
    _check_mass(joints, masses)
    if not any(j.type != "fixed" for j in joints):
        raise InvalidInputError(f"URDF robot {name!r} has no movable joint")
    return RobotDescription(name, hashlib.sha256(text.encode("utf-8")).hexdigest(),
                            tuple(joints), _normalize(root), text)


def _check_mimics(joints):
    """A ``<mimic>`` names another movable joint, and mimic joints form no cycle."""
    by_name = {j.name: j for j in joints}
    for j in joints:
        if j.mimic is None:
            continue
        target = by_name.get(j.mimic)
        if target is None:
            raise InvalidInputError(f"URDF joint {j.name!r} <mimic joint={j.mimic!r}>: no such joint")
        if target.type == "fixed":
            raise InvalidInputError(f"URDF joint {j.name!r} <mimic joint={j.mimic!r}>: that joint "
                                    f"is fixed (a mimic follows a movable joint)")
        seen, k = [j.name], target
        while k.mimic is not None:
            if k.name in seen:
                raise InvalidInputError(f"URDF joint {j.name!r}: the <mimic> joints "
                                        f"{' -> '.join(seen + [k.name])} form a cycle")
            seen.append(k.name)
            k = by_name[k.mimic]


def _short(text, limit=60):
    """``repr(text)``, cut to ``limit`` characters (names in messages stay short)."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[:limit] + "...'"


class _Refused(Exception):
    pass


def _check_structure(text):
    """One streaming pass (expat, no tree, no recursion) before the text is parsed into a
    tree: at most MAX_DEPTH levels of nesting, MAX_ELEMENTS elements, names and link
    references of at most MAX_NAME characters.  InvalidInputError naming the line."""
    from xml.parsers import expat

    parser = expat.ParserCreate()
    state = {"depth": 0, "count": 0}

    def start(tag, attrs):
        state["depth"] += 1
        state["count"] += 1
        line = parser.CurrentLineNumber
        if state["depth"] > MAX_DEPTH:
            raise _Refused(f"URDF nests elements more than {MAX_DEPTH} deep (<{tag[:40]}> at line {line})")
        if state["count"] > MAX_ELEMENTS:
            raise _Refused(f"URDF has more than {MAX_ELEMENTS} elements (line {line})")
        for key in ("name", "link"):
            value = attrs.get(key)
            if value is not None and len(value) > MAX_NAME:
                raise _Refused(f"URDF <{tag[:40]}> {key} of {len(value)} characters at line {line}, more "
                               f"than the limit {MAX_NAME}: {_short(value)}")

    def end(tag):
        state["depth"] -= 1

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(text, True)
    except _Refused as exc:
        raise InvalidInputError(str(exc)) from None
    except expat.ExpatError as exc:
        raise InvalidInputError(f"malformed URDF: {exc}") from None


def _link_mass(link, lname):
    inertial = link.find("inertial")
    if inertial is None:
        return 0.0
    what = f"link {lname!r} <inertial>"
    mass = inertial.find("mass")
    if mass is None:
        raise InvalidInputError(f"URDF {what} has no <mass>")
    m = _float(mass, "value", what + " <mass>")
    if m < 0:
        raise InvalidInputError(f"URDF {what}: mass {m!r} must be >= 0")
    inertia = inertial.find("inertia")
    if inertia is None:
        raise InvalidInputError(f"URDF {what} has no <inertia>")
    diag = [_float(inertia, k, what + " <inertia>") for k in ("ixx", "iyy", "izz")]
    for k in ("ixy", "ixz", "iyz"):  # urdfdom requires all six
        _float(inertia, k, what + " <inertia>")
    if min(diag) < 0:
        raise InvalidInputError(f"URDF {what}: principal moments {diag} must be >= 0")
    return m + sum(diag)  # > 0: the link carries mass or rotational inertia


def _check_mass(joints, masses):
    """A movable joint must move something with mass or inertia (else M is singular)."""
    below = {}
    for j in joints:
        below.setdefault(j.parent, []).append(j.child)

    def carried(link, seen=()):
        if link in seen:
            return 0.0
        return masses[link] + sum(carried(c, seen + (link,)) for c in below.get(link, ()))

    for j in joints:
        if j.type != "fixed" and not carried(j.child) > 0.0:
            raise InvalidInputError(
                f"URDF joint {j.name!r} moves no mass: link {j.child!r} has no <inertial> "
                f"(or zero mass and inertia) and nothing with mass is attached below it "
                f"(a zero-mass chain makes the mass matrix singular)")


def _normalize(root):
    """URDF for pinocchio: continuous -> revolute with no position limit; meshes dropped."""
    root = ET.fromstring(ET.tostring(root))  # a copy
    for link in root.findall("link"):
        for tag in ("visual", "collision"):
            for el in link.findall(tag):
                link.remove(el)
    for el in root.findall("joint"):
        if el.get("type") == "continuous":
            el.set("type", "revolute")
            limit = el.find("limit")
            if limit is None:
                limit = ET.SubElement(el, "limit")
                limit.set("effort", "0")
                limit.set("velocity", "0")
            limit.set("lower", "-1e300")
            limit.set("upper", "1e300")
    return ET.tostring(root, encoding="unicode")
