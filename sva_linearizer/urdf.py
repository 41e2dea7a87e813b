# SPDX-License-Identifier: BSD-3-Clause
"""URDF import: build a :class:`~sva_linearizer.model.Model` from a URDF file or XML string.

    model = load_urdf("robot.urdf", floating_base=True, gravity=(0, 0, -9.81))

The result is the same kinematic tree as Pinocchio's ``buildModelFromUrdf`` (with a
``JointModelFreeFlyer`` root joint for ``floating_base=True``, without one otherwise), so that the
two can be compared joint by joint:

* Each model body is one moving URDF link together with the 1-DoF joint that moves it; the body is
  named after the URDF *joint* (``model.joint_names`` are URDF joint names). A body's frame is its
  URDF link frame and its placement is the joint's ``<origin>`` (pose of the child link frame in the
  parent link frame), composed with the placements of any fixed joints above it.
* The base (root) body is the URDF root link (``model.base_name``). With ``floating_base=False`` it
  is welded to the world; its inertia is kept as ``model.base_inertia`` all the same. The default,
  ``floating_base=None``, is :func:`floating_by_default`: a fixed base when the root link is
  ``world`` (as arm descriptions written for MoveIt or Gazebo fix the robot to a ``world`` link),
  else a floating base.
* ``revolute`` and ``continuous`` joints become ``Joint.revolute(axis)``, ``prismatic`` joints
  ``Joint.prismatic(axis)``; the axis is normalised. A missing ``<axis>`` means (1, 0, 0) (URDF).
* ``fixed`` joints are merged: the child link's inertia is expressed in the frame of the moving body
  it is welded to and added there, and the placements of its children are composed with the fixed
  joint's origin (recursively, so chains of fixed joints work).
* Links without ``<inertial>`` have zero inertia; ``<inertial><origin rpy>`` rotates the inertia
  tensor into the link frame (I = R I_urdf R^T) and ``<origin xyz>`` is the centre of mass.
* ``planar`` joints become three 1-DoF joints, in this order: ``<joint>_x`` (prismatic along the
  first in-plane axis), ``<joint>_y`` (prismatic along the second in-plane axis) and ``<joint>_rot``
  (revolute about the plane normal). The two intermediate bodies are massless; the child link (and
  its inertia) belongs to ``<joint>_rot``. The normal is the URDF ``<axis>`` (the plane is
  perpendicular to it, as the URDF specification says); for the usual axis (0, 0, 1) the in-plane
  axes are x and y of the joint frame, so the configuration (x, y, theta) gives the same pose as
  Pinocchio's ``JointModelPlanar``. (Pinocchio ignores the axis and always uses the joint frame's
  xy-plane; for other axes the two differ. In-plane axes for a general normal n: u is the joint
  frame's x, y or z axis least aligned with n, projected onto the plane, and v = n x u.)
* ``mimic`` joints are independent degrees of freedom by default (``mimic=False``, Pinocchio's
  default too); with ``mimic=True`` each follows its parent joint, s = multiplier s_parent + offset
  (a mimic of a mimic composes), and the result is a ``CoupledModel`` whose degrees of freedom are
  the independent joints (coupling.py; Pinocchio's ``buildModelFromUrdf(..., mimic=True)``). A
  mimic of a joint that is not a moving joint of the tree, or a cycle, is an error naming them.
* A ``floating`` joint inside the URDF is rejected: the base's freedom is chosen with
  ``floating_base``. Any other joint type is rejected too.
* Joint order is Pinocchio's (and urdfdom's): depth-first from the root, the child joints of a link
  visited in the (byte-wise) order of their names. Parents always come before children.

Joint limits, damping/friction, visuals, collisions, materials, transmissions, Gazebo and sensor
elements do not enter the rigid-body dynamics and are dropped before the URDF semantics are parsed
with ``urdf_parser_py`` (which would otherwise reject some real robots: a ``<texture>`` without a
filename in iCub and Romeo, old-style PR2 ``<transmission>`` elements).

Safety: the XML is parsed with lxml without entity substitution, DTD loading or network access, and
any document type declaration (hence any ``<!ENTITY>``) is rejected, so a hostile "billion laughs"
or external-entity URDF fails fast with a ValueError instead of expanding.

Errors in the URDF raise ``ValueError`` with a message naming the offending link or joint: not
XML, no ``<robot>``, no links, several root links, a cycle, a joint naming a missing link, a link
with two parent joints, malformed numbers, NaN or infinities, an unsupported joint type. These are
always errors: no tree can be built.

Physically invalid dynamics are errors by default (``validate=True``, strict) and warnings with
``validate=False``:

* a negative mass;
* a link's inertia tensor that is not positive semi-definite, when the rigid body it ends up in
  (after merging fixed joints) is not positive semi-definite either (when that body is, it is only
  a warning in both modes: TIAGo's tiny antenna links welded to its heavy base);
* a mass matrix that is singular at every configuration (``Model.validate``: a massless subtree,
  a massless floating base, a fixed base with no joints), named by its topmost joint.

With ``validate=False`` every URDF that Pinocchio's ``buildModelFromUrdf`` loads (and that has
only the joint types above) loads, with one ``UserWarning`` per such item naming the link or joint
(example-robot-data's ``romeo_laas_small``: indefinite inertia tensors of ``body``,
``LHipPitch_link``, ``RHipPitch_link`` and massless grippers; ``romeo``: massless finger links).
The model is built from the numbers as given, like Pinocchio's, and ``model.strict`` is False. The
algorithms that invert M (``forward_dynamics``, ``linearize``) refuse a configuration where M is
singular (for a massless subtree: every configuration) with a ``ValueError`` naming the joint; the
ones that do not (``mass_matrix``, ``extended_inverse_dynamics`` and its derivatives) compute.
Known gap (xfail in test/test_urdf.py, to be fixed in algorithms.py): a pivot that is exactly zero,
as a massless subtree gives, surfaces as ``ZeroDivisionError`` from the numba kernel (without numba,
as a ValueError naming an ancestor joint).
"""
from __future__ import annotations

import codecs
import math
import os
import pathlib
import re
import warnings

import numpy as np
from lxml import etree

from .joints import Joint
from .coupling import CoupledModel
from .model import Model
from .spatial import rpy_to_matrix, spatial_inertia

__all__ = ["load_urdf"]

# Joint types and what they become.
_MOVING_TYPES = {"revolute", "continuous", "prismatic"}
_SUPPORTED_TYPES = _MOVING_TYPES | {"fixed", "planar"}

# The part of URDF that the rigid-body dynamics need: tag -> (attributes kept, child tags kept).
# Everything else (visual, collision, robot-level material, gazebo, transmission, sensor, limit,
# dynamics, calibration, safety_controller, xacro leftovers, unknown elements) is dropped.
_KEEP = {
    "robot": ({"name", "version"}, {"link", "joint"}),
    "link": ({"name"}, {"inertial"}),
    "inertial": (set(), {"origin", "mass", "inertia"}),
    "origin": ({"xyz", "rpy"}, set()),
    "mass": ({"value"}, set()),
    "inertia": ({"ixx", "ixy", "ixz", "iyy", "iyz", "izz"}, set()),
    "joint": ({"name", "type"}, {"origin", "parent", "child", "axis", "mimic"}),
    "parent": ({"link"}, set()),
    "child": ({"link"}, set()),
    "axis": ({"xyz"}, set()),
    "mimic": ({"joint", "multiplier", "offset"}, set()),
}


# ---------------------------------------------------------------------------------------------
# Public entry point
# ---------------------------------------------------------------------------------------------
#: The root link name that means "the world": a URDF rooted at it is fixed to the world by default.
WORLD_LINK = "world"


def floating_by_default(root_link: str) -> tuple[bool, str]:
    """The base :func:`load_urdf` chooses when ``floating_base`` is None, from the URDF's root link
    -> (floating, why): fixed when the root link is ``world`` (the robot is fixed to the world
    frame, as arm descriptions for MoveIt and Gazebo write it), floating otherwise."""
    if root_link == WORLD_LINK:
        return False, f"the URDF's root link is '{WORLD_LINK}': the robot is fixed to the world"
    return True, f"the URDF's root link '{root_link}' is not '{WORLD_LINK}': the base moves"


def load_urdf(path_or_xml, floating_base: bool | None = None, gravity=(0.0, 0.0, -9.81), *, validate=True,
              mimic: bool = False) -> Model | CoupledModel:
    """Build a Model from a URDF file path (str or pathlib.Path) or a URDF XML string/bytes.

    A string is taken as XML when its first non-blank character is '<', otherwise as a path.
    ``floating_base``: True for a free-floating (SE(3)) base, False to weld the root link to the
    world; None (the default) is :func:`floating_by_default`: fixed when the URDF's root link is
    ``world``, else floating. ``gravity``: world-frame gravity vector.

    ``validate=True`` (default, strict): physically invalid dynamics are errors: a negative mass, an
    indefinite inertia tensor (of a rigid body after merging fixed joints), a mass matrix that is
    singular at every configuration (``Model.validate``: a massless subtree); the ValueError names
    the link or joint. ``validate=False`` (lenient): each of these is a ``UserWarning`` naming the
    link or joint instead, so that any URDF Pinocchio loads does load; the returned model has
    ``model.strict = False`` and the algorithms that invert M refuse, at run time, configurations
    where it is singular (see the module docstring, also for a known gap). Malformed or hostile
    input is an error in both modes.

    ``mimic=True``: the URDF's mimic joints follow their parents (a CoupledModel, see the module
    docstring); False: every joint is a degree of freedom.

    Raises ValueError for a malformed or hostile URDF (see the module docstring),
    FileNotFoundError for a missing pathlib.Path.
    """
    strict = bool(validate)
    data, label, is_text = _read_source(path_or_xml)
    root = _parse_xml_safely(data, label, is_text)
    clean = _dynamics_subset(root, label)
    robot = _parse_urdf_semantics(clean, label)
    model = _build_model(robot, floating_base, gravity, label, strict)
    model.strict = strict
    model.arrays()  # runs Model.validate(): raises (strict) or warns (lenient)
    if mimic:
        coupled = {}
        for j in robot.joints:
            if j.mimic is not None and j.type != "fixed":
                k = 1.0 if j.mimic.multiplier is None else float(j.mimic.multiplier)
                o = 0.0 if j.mimic.offset is None else float(j.mimic.offset)
                if j.type == "planar" or not (np.isfinite(k) and np.isfinite(o)):
                    raise ValueError(f"{label}: joint '{j.name}': a mimic joint must be revolute, "
                                     "continuous or prismatic with a finite multiplier and offset")
                coupled[j.name] = (j.mimic.joint, k, o)
        if coupled:
            try:
                return CoupledModel(model, coupled)
            except ValueError as e:
                raise ValueError(f"{label}: {e}") from None
    return model


# ---------------------------------------------------------------------------------------------
# Reading and safe XML parsing
# ---------------------------------------------------------------------------------------------
def _read_source(path_or_xml):
    """(data, label for messages, whether data is decoded text). Leading blanks and byte-order marks
    before the first '<' are dropped; UTF-16/32 input is decoded so that it can be scanned."""
    if isinstance(path_or_xml, (bytes, bytearray)):
        data, is_text = _from_bytes(bytes(path_or_xml))
        if data.startswith("<" if is_text else b"<"):
            return data, "URDF", is_text
        raise ValueError("URDF bytes are not XML (they do not start with '<')")
    if isinstance(path_or_xml, str):
        text = path_or_xml.lstrip("\ufeff \t\r\n")
        if text.startswith("<"):
            return text, "URDF", True
        path = pathlib.Path(path_or_xml)
        if not path_or_xml or not path.is_file():
            raise ValueError(f"'{path_or_xml[:80]}' is neither URDF XML (it does not start with '<') "
                             "nor an existing file")
    elif isinstance(path_or_xml, os.PathLike):
        path = pathlib.Path(path_or_xml)
        if not path.is_file():
            raise FileNotFoundError(f"URDF file not found: {path}")
    else:
        raise TypeError(f"load_urdf expects a path or an XML string, got {type(path_or_xml).__name__}")
    data, is_text = _from_bytes(path.read_bytes())
    return data, str(path), is_text


def _from_bytes(data):
    """UTF-16/32 (with a byte-order mark) -> str; otherwise the bytes without a UTF-8 BOM. Both
    without leading blanks."""
    for bom, codec in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                       (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            try:
                return data.decode(codec).lstrip("\ufeff \t\r\n"), True
            except UnicodeDecodeError as e:
                raise ValueError(f"URDF is not valid {codec.upper()}: {e}") from None
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    return data.lstrip(b" \t\r\n"), False


# Items that may precede a document type declaration: blanks, the XML declaration / processing
# instructions, comments.
_PROLOG_ITEM = re.compile(rb"\s+|<\?.*?\?>|<!--.*?-->", re.DOTALL)


def _prolog_declares_dtd(raw):
    """Whether the prolog (everything before the root element) holds a '<!...' declaration, i.e. a
    DOCTYPE (the only place where ENTITY declarations can live). Checked on the raw bytes, before
    libxml2 sees them, so that a hostile DTD is never processed at all."""
    i = 0
    while (m := _PROLOG_ITEM.match(raw, i)) is not None:
        i = m.end()
    return raw.startswith(b"<!", i)


def _parse_xml_safely(data, label, is_text):
    """Parse with lxml without entity expansion, DTD loading or network access; reject any DTD."""
    parser = etree.XMLParser(
        resolve_entities=False,  # never substitute entities (billion laughs, external entities)
        load_dtd=False,
        dtd_validation=False,
        no_network=True,
        huge_tree=False,         # keep libxml2's size/depth limits
        remove_comments=True,
        remove_pis=True,
        # A str is already decoded: parse its UTF-8 bytes whatever its XML declaration says.
        encoding="utf-8" if is_text else None,
    )
    raw = data.encode("utf-8") if is_text else data
    if _prolog_declares_dtd(raw):
        raise ValueError(f"{label}: URDF must not contain a DTD or entity declarations")
    try:
        root = etree.fromstring(raw, parser)
    except etree.XMLSyntaxError as e:
        raise ValueError(f"{label}: not well-formed XML: {e}") from None
    if root is None:
        raise ValueError(f"{label}: not XML (empty document)")
    # Second line of defence (e.g. UTF-16 without a byte-order mark, which the scan cannot read).
    docinfo = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None or docinfo.externalDTD is not None:
        raise ValueError(f"{label}: URDF must not contain a DTD or entity declarations")
    # Without a DTD no entity can be defined; refuse leftovers of any kind all the same.
    if any(isinstance(el, etree._Entity) for el in root.iter()):
        raise ValueError(f"{label}: URDF must not contain a DTD or entity declarations")
    return root


def _local_name(el, default_ns):
    """Tag name of an element in the document's default (or no) namespace, else None."""
    if not isinstance(el.tag, str):
        return None  # comment / processing instruction / entity
    q = etree.QName(el)
    if q.namespace is not None and q.namespace != default_ns:
        return None  # e.g. xacro:..., gazebo plugin namespaces
    return q.localname


def _dynamics_subset(root, label):
    """A fresh <robot> tree with only what the dynamics need (see _KEEP)."""
    default_ns = root.nsmap.get(None)
    if _local_name(root, default_ns) != "robot":
        raise ValueError(f"{label}: no <robot> root element (found <{etree.QName(root).localname}>)")

    def copy(src, tag):
        attrs, children = _KEEP[tag]
        dst = etree.Element(tag, {k: v for k, v in src.attrib.items() if k in attrs})
        for child in src:
            ctag = _local_name(child, default_ns)
            if ctag in children:
                dst.append(copy(child, ctag))
        return dst

    clean = copy(root, "robot")
    _check_numbers(clean, label)
    # Check joint types here so that the message is ours, not urdf_parser_py's assertion.
    for j in clean.iterfind("joint"):
        jtype = j.get("type")
        name = j.get("name")
        if jtype == "floating":
            raise ValueError(
                f"{label}: joint '{name}' is of type 'floating'; a floating joint inside the URDF is not "
                "supported: the base is chosen with load_urdf(..., floating_base=True), so remove this "
                "joint (and the link above it) to make its child the root link")
        if jtype not in _SUPPORTED_TYPES:
            raise ValueError(f"{label}: joint '{name}' has unsupported type '{jtype}' (supported: "
                             f"{', '.join(sorted(_SUPPORTED_TYPES))})")
    return clean


# Numeric attributes: tag -> {attribute: how many numbers}.
_NUMBERS = {
    "origin": {"xyz": 3, "rpy": 3},
    "mass": {"value": 1},
    "inertia": {k: 1 for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")},
    "axis": {"xyz": 3},
    "mimic": {"multiplier": 1, "offset": 1},
}


def _check_numbers(clean, label):
    """Malformed numbers, reported with the link/joint they belong to (urdf_parser_py would only
    say 'could not convert string to float'). NaN and infinities are checked later, by meaning."""
    for el in clean:
        for sub in el.iter(*_NUMBERS):
            for attr, n in _NUMBERS[sub.tag].items():
                text = sub.get(attr)
                if text is None:
                    continue
                parts = text.split()
                try:
                    [float(x) for x in parts]
                    ok = len(parts) == n
                except ValueError:
                    ok = False
                if not ok:
                    raise ValueError(f"{label}: {el.tag} '{el.get('name')}': <{sub.tag} {attr}=\"{text}\"> "
                                     f"must be {n} number{'s' if n > 1 else ''}")


def _parse_urdf_semantics(clean, label):
    """urdf_parser_py's Robot for the cleaned tree (its errors become ValueError)."""
    from urdf_parser_py import urdf as urdf_py

    xml = etree.tostring(clean, encoding="unicode")
    try:
        return urdf_py.URDF.from_xml_string(xml)
    except Exception as e:  # urdf_parser_py raises ParseError, AssertionError, ValueError, ...
        raise ValueError(f"{label}: invalid URDF: {e}") from None


# ---------------------------------------------------------------------------------------------
# URDF -> Model
# ---------------------------------------------------------------------------------------------
def _finite(values, what, n=3):
    a = np.asarray(values, dtype=float).reshape(-1)
    if a.shape != (n,):
        raise ValueError(f"{what}: expected {n} numbers, got {list(values)!r}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: NaN or infinite value {list(values)!r}")
    return a


def _pose(origin, what):
    """(R, p) of a urdf_parser_py Pose (identity when absent)."""
    if origin is None:
        return np.eye(3), np.zeros(3)
    xyz = origin.xyz if origin.xyz is not None else (0.0, 0.0, 0.0)
    rpy = origin.rpy if origin.rpy is not None else (0.0, 0.0, 0.0)
    p = _finite(xyz, f"{what} <origin xyz>")
    R = rpy_to_matrix(_finite(rpy, f"{what} <origin rpy>"))
    return R, p


def _link_inertia(link, label, strict):
    """(mass, com, I_com) of a URDF link in its link frame; zero when it has no <inertial>."""
    what = f"link '{link.name}'"
    inertial = link.inertial
    if inertial is None:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    mass = inertial.mass
    if mass is None:
        raise ValueError(f"{what}: <inertial> has no <mass>")
    mass = float(mass)
    if not math.isfinite(mass):
        raise ValueError(f"{what}: mass is NaN or infinite ({mass})")
    if mass < 0.0:
        msg = f"{label}: {what}: negative mass {mass}"
        if strict:
            raise ValueError(msg)
        warnings.warn(f"{msg}; accepted because load_urdf(..., validate=False)", stacklevel=4)
    R, com = _pose(inertial.origin, f"{what} <inertial>")
    if inertial.inertia is None:
        I = np.zeros((3, 3))
    else:
        I = np.array(inertial.inertia.to_matrix(), dtype=float)
        if not np.all(np.isfinite(I)):
            raise ValueError(f"{what}: inertia tensor has NaN or infinite entries")
    return mass, com, R @ I @ R.T


def _indefinite(I_com):
    """Eigenvalues of a rotational inertia that is not positive semi-definite, else None (round-off
    below 1e-12 is tolerated)."""
    ev = np.linalg.eigvalsh(I_com)
    return ev if ev[0] < -1e-12 * max(1.0, ev[-1]) else None


def _check_body_inertias(inertia, bad_links, label, strict):
    """An indefinite link inertia is an error when the rigid body it belongs to (after merging fixed
    joints) is indefinite too; otherwise a warning (some real URDFs, e.g. TIAGo's antenna links,
    have tiny indefinite tensors welded to a heavy body). Not strict: always a warning."""
    for body, bad in bad_links.items():
        M = inertia[body]
        scale = max(1.0, float(np.max(np.abs(M))))
        body_ok = np.linalg.eigvalsh(M)[0] >= -1e-9 * scale  # Model's own criterion
        for link_name, ev in bad:
            msg = (f"{label}: link '{link_name}': inertia tensor is not positive semi-definite "
                   f"(eigenvalues {', '.join(f'{e:.6g}' for e in ev)})")
            where = "the base" if body is None else f"body '{body}'"
            if body_ok:
                warnings.warn(f"{msg}; accepted because {where}, which it is welded to, is", stacklevel=4)
            elif strict:
                raise ValueError(msg)
            else:
                warnings.warn(f"{msg}, and neither is {where}, which it belongs to; accepted because "
                              "load_urdf(..., validate=False): the mass matrix may be indefinite",
                              stacklevel=4)


def _planar_axes(normal):
    """Two in-plane unit axes (u, v), u x v = normal: u is the joint frame's x, y or z axis least
    aligned with the normal (the first on ties), projected onto the plane; (x, y) for normal +z."""
    e = np.eye(3)[int(np.argmin(np.abs(normal)))]
    u = e - (e @ normal) * normal
    u /= np.linalg.norm(u)
    return u, np.cross(normal, u)


def _joint_axis(joint, what):
    axis = joint.axis if joint.axis is not None else (1.0, 0.0, 0.0)  # URDF default
    a = _finite(axis, f"{what} <axis>")
    norm = np.linalg.norm(a)
    if norm < 1e-12:
        raise ValueError(f"{what}: <axis> is zero")
    return a / norm


def _check_tree(robot, label):
    """Names unique, links exist, one parent per link, one root, no cycle. Returns
    (links by name, root name, children: link -> joints sorted by name)."""
    links = {}
    for link in robot.links:
        if link.name in links:
            raise ValueError(f"{label}: link '{link.name}' is defined twice")
        links[link.name] = link
    if not links:
        raise ValueError(f"{label}: URDF has no links")

    seen_joints = set()
    parent_joint = {}
    children = {name: [] for name in links}
    for j in robot.joints:
        what = f"joint '{j.name}'"
        if j.name in seen_joints:
            raise ValueError(f"{label}: {what} is defined twice")
        seen_joints.add(j.name)
        for role, lname in (("parent", j.parent), ("child", j.child)):
            if lname not in links:
                raise ValueError(f"{label}: {what} references missing {role} link '{lname}'")
        if j.child == j.parent:
            raise ValueError(f"{label}: {what} connects link '{j.child}' to itself (a cycle)")
        if j.child in parent_joint:
            raise ValueError(f"{label}: link '{j.child}' has two parent joints: "
                             f"'{parent_joint[j.child].name}' and '{j.name}'")
        parent_joint[j.child] = j
        children[j.parent].append(j)

    roots = [name for name in links if name not in parent_joint]
    if not roots:
        raise ValueError(f"{label}: no root link: every link has a parent joint, so the joints form a "
                         f"cycle (joints: {', '.join(sorted(seen_joints))})")
    if len(roots) > 1:
        raise ValueError(f"{label}: more than one root link (links without a parent joint): "
                         f"{', '.join(roots)}")
    # Every link must hang from the root; links that don't lie on (or under) a cycle.
    reached, stack = {roots[0]}, [roots[0]]
    while stack:
        for j in children[stack.pop()]:
            reached.add(j.child)
            stack.append(j.child)
    unreached = [name for name in links if name not in reached]
    if unreached:
        cycle_joints = sorted(parent_joint[name].name for name in unreached)
        raise ValueError(f"{label}: the joints {', '.join(cycle_joints)} form a cycle (links "
                         f"{', '.join(unreached)} cannot be reached from the root link '{roots[0]}')")
    for js in children.values():
        js.sort(key=lambda j: j.name.encode("utf-8"))  # urdfdom/Pinocchio order (std::map)
    return links, roots[0], children


def _express_in(mass, com, I_com, R, p):
    """6x6 inertia of a body whose (mass, com, I_com) is given in a frame at pose (R, p)."""
    return spatial_inertia(mass, R @ com + p, R @ I_com @ R.T)


def _build_model(robot, floating_base, gravity, label, strict=True):
    links, root, children = _check_tree(robot, label)
    if floating_base is None:
        floating_base = floating_by_default(root)[0]
    joint_names = {j.name for j in robot.joints}

    # Pass 1: depth-first walk. `attach[link] = (body, R, p)`: the body the link is rigidly part of
    # (None = base) and the link frame's pose in that body's frame. Bodies are collected in order
    # with their joint and placement; inertias are accumulated (fixed links add to their body).
    base = None  # key for the base body while accumulating
    attach = {root: (base, np.eye(3), np.zeros(3))}
    m, c, Ic = _link_inertia(links[root], label, strict)
    inertia = {base: spatial_inertia(m, c, Ic)}
    bodies = []  # (name, parent body or None, Joint, R, p)
    bad_links = {}  # body -> [(link, eigenvalues)] of links with indefinite inertia tensors

    def note_if_indefinite(link_name, body, I_com):
        ev = _indefinite(I_com)
        if ev is not None:
            bad_links.setdefault(body, []).append((link_name, ev))

    note_if_indefinite(root, base, Ic)

    stack = list(reversed(children[root]))
    while stack:
        j = stack.pop()
        what = f"joint '{j.name}'"
        body, R_l, p_l = attach[j.parent]
        R_o, p_o = _pose(j.origin, what)
        R, p = R_l @ R_o, R_l @ p_o + p_l  # joint frame in the frame of `body`
        m, c, Ic = _link_inertia(links[j.child], label, strict)
        if j.type == "fixed":
            note_if_indefinite(j.child, body, Ic)
            attach[j.child] = (body, R, p)
            inertia[body] = inertia[body] + _express_in(m, c, Ic, R, p)
        elif j.type in _MOVING_TYPES:
            axis = _joint_axis(j, what)
            joint = Joint.prismatic(axis) if j.type == "prismatic" else Joint.revolute(axis)
            bodies.append((j.name, body, joint, R, p))
            note_if_indefinite(j.child, j.name, Ic)
            attach[j.child] = (j.name, np.eye(3), np.zeros(3))
            inertia[j.name] = spatial_inertia(m, c, Ic)
        else:  # planar: x, y translations then rotation about the normal (massless intermediates)
            normal = _joint_axis(j, what)
            u, v = _planar_axes(normal)
            names = [f"{j.name}_x", f"{j.name}_y", f"{j.name}_rot"]
            for n in names:
                if n in joint_names:
                    raise ValueError(f"{label}: {what} is planar and becomes joints {', '.join(names)}, "
                                     f"but '{n}' is already a joint name")
            bodies.append((names[0], body, Joint.prismatic(u), R, p))
            bodies.append((names[1], names[0], Joint.prismatic(v), np.eye(3), np.zeros(3)))
            bodies.append((names[2], names[1], Joint.revolute(normal), np.eye(3), np.zeros(3)))
            inertia[names[0]] = np.zeros((6, 6))
            inertia[names[1]] = np.zeros((6, 6))
            attach[j.child] = (names[2], np.eye(3), np.zeros(3))
            inertia[names[2]] = spatial_inertia(m, c, Ic)
            note_if_indefinite(j.child, names[2], Ic)
        stack.extend(reversed(children[j.child]))

    _check_body_inertias(inertia, bad_links, label, strict)

    # Pass 2: the Model.
    model = Model(floating_base=floating_base, gravity=gravity, name=robot.name)
    model.base_name = root
    model.set_base_inertia(inertia[base])
    for name, parent, joint, R, p in bodies:
        if name == root:
            raise ValueError(f"{label}: joint '{name}' has the same name as the root link; "
                             "rename one of them")
        model.add_body(name, parent, joint, placement=(R, p), inertia=inertia[name])
    for link, (body, R, p) in attach.items():   # every link stays a frame (as Pinocchio keeps them)
        model.add_frame(link, root if body is None else body, (R, p))
    return model
