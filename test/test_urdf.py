# SPDX-License-Identifier: BSD-3-Clause
"""URDF import (sva_linearizer.urdf) and named robots (sva_linearizer.robots).

Every known robot is compared with Pinocchio's model of the same URDF, joint by joint: names and
order, parent joint, joint placement, body inertia, motion subspace, base inertia (to 1e-10).
Then one test per error case, hostile XML, and the planar / mimic / fixed-joint-merge semantics.
"""
from __future__ import annotations

import pathlib
import re
import sys
import time
import warnings

import numpy as np
import pytest

pin = pytest.importorskip("pinocchio")  # the oracle; a test dependency (`pip install pin`)

import sva_linearizer as sl  # noqa: E402
from sva_linearizer import robots  # noqa: E402
from sva_linearizer.joints import PRISMATIC, REVOLUTE  # noqa: E402
from sva_linearizer.robots import (  # noqa: E402
    BUNDLED_ROBOTS,
    KNOWN_ROBOTS,
    ROBOT_NAMES,
    example_robot_data_dir,
    load_robot,
    robot_urdf_path,
)
from sva_linearizer.spatial import placement_to_xform, rpy_to_matrix, skew  # noqa: E402
from sva_linearizer.urdf import load_urdf  # noqa: E402

TOL = 1e-10

# Known robots whose dynamics are physically invalid: name -> the strict error's subject. They load
# with validate=False (lenient), one warning per item, as Pinocchio loads them.
# romeo_laas_small: the inertia tensors of links 'body', 'LHipPitch_link' and 'RHipPitch_link' are
# indefinite (eigenvalue -0.0213 for 'body'), even after merging the links welded to them, and the
# grippers are massless (l_gripper_joint, r_gripper_joint).
INVALID = {"romeo_laas_small": "link 'body': inertia tensor is not positive semi-definite"}
INVALID_WARNINGS = {"romeo_laas_small": [
    "link 'body': inertia tensor is not positive semi-definite",
    "link 'LHipPitch_link': inertia tensor is not positive semi-definite",
    "link 'RHipPitch_link': inertia tensor is not positive semi-definite",
    "joint 'l_gripper_joint': .*massless subtree",
    "joint 'r_gripper_joint': .*massless subtree"]}


def assert_lenient_load_warns(load, name):
    """load() (with validate=False) warns once about each invalid item of robot `name`."""
    with pytest.warns(UserWarning) as record:
        model = load()
    messages = [str(w.message) for w in record]
    for pattern in INVALID_WARNINGS[name]:
        assert sum(bool(re.search(pattern, m)) for m in messages) == 1, (pattern, messages)
    return model


def _erd_installed():
    try:
        example_robot_data_dir()
        return True
    except ValueError:
        return False


def _needs_erd(name):
    if name not in BUNDLED_ROBOTS and not _erd_installed():
        pytest.skip("example-robot-data is not installed (pip install example-robot-data)")


# ---------------------------------------------------------------------------------------------
# Pinocchio comparison
# ---------------------------------------------------------------------------------------------
def pin_model(src, floating, xml=False):
    build = pin.buildModelFromXML if xml else pin.buildModelFromUrdf
    src = src if xml else str(src)
    return build(src, pin.JointModelFreeFlyer()) if floating else build(src)


def pin_motion_subspaces(pm):
    """Joint id -> motion subspace (6 x nv_j) in the joint frame: the joint's columns of its own
    LOCAL Jacobian at the neutral configuration."""
    data = pm.createData()
    pin.computeJointJacobians(pm, data, pin.neutral(pm))
    out = {}
    for j in range(1, pm.njoints):
        J = np.asarray(pin.getJointJacobian(pm, data, j, pin.ReferenceFrame.LOCAL)).reshape(6, pm.nv)
        jm = pm.joints[j]
        out[j] = J[:, jm.idx_v:jm.idx_v + jm.nv]
    return out


def assert_matches_pinocchio(model, pm):
    first = 2 if model.floating_base else 1  # skip 'universe' (and 'root_joint')
    assert list(pm.names)[first:] == model.joint_names  # same names, same (depth-first) order
    assert model.nj == pm.njoints - first
    assert model.nv == pm.nv
    base_pin = 1 if model.floating_base else 0
    np.testing.assert_allclose(model.base_inertia, pm.inertias[base_pin].matrix(), rtol=0, atol=TOL)
    S = pin_motion_subspaces(pm)
    for body in model.bodies:
        j = pm.getJointId(body.name)
        what = f"joint {body.name}"
        pj = pm.parents[j]
        expected_parent = model.base_name if pj < first else pm.names[pj]
        assert model.parent_name(body.name) == expected_parent, what
        M = pm.jointPlacements[j]
        np.testing.assert_allclose(body.placement_R, M.rotation, rtol=0, atol=TOL, err_msg=what)
        np.testing.assert_allclose(body.placement_p, M.translation, rtol=0, atol=TOL, err_msg=what)
        np.testing.assert_allclose(body.inertia, pm.inertias[j].matrix(), rtol=0, atol=TOL, err_msg=what)
        np.testing.assert_allclose(body.joint.motion_subspace(), S[j][:, 0], rtol=0, atol=TOL, err_msg=what)


# Warnings about real robots' data: TIAGo's antenna links have slightly indefinite inertia tensors
# (welded to the heavy base), a few of romeo_small's bodies violate the triangle inequality.
DATA_WARNINGS = ("ignore:.*link 'base_antenna_(left|right)_link'.*welded:UserWarning",
                 "ignore:.*not physically consistent:UserWarning")


@pytest.mark.filterwarnings(*DATA_WARNINGS)
@pytest.mark.parametrize("floating", [True, False], ids=["floating", "fixed"])
@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_robot_matches_pinocchio(name, floating):
    _needs_erd(name)
    path = robot_urdf_path(name)
    if name in INVALID:
        with pytest.raises(ValueError, match=INVALID[name]):
            load_urdf(path, floating_base=floating)
        model = assert_lenient_load_warns(lambda: load_urdf(path, floating_base=floating, validate=False),
                                          name)
    else:
        model = load_urdf(path, floating_base=floating, validate=False)
    assert model.floating_base is floating
    assert_matches_pinocchio(model, pin_model(path, floating))


@pytest.mark.filterwarnings(*DATA_WARNINGS)
@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_load_robot_validates(name):
    """load_robot uses the default base and checks the mass matrix (Model.validate)."""
    _needs_erd(name)
    if name in INVALID:
        with pytest.raises(ValueError, match=INVALID[name]):
            load_robot(name)
        model = assert_lenient_load_warns(lambda: load_robot(name, validate=False), name)
        assert model.strict is False
    else:
        model = load_robot(name)
        assert model.strict is True
    default = {**KNOWN_ROBOTS, **BUNDLED_ROBOTS}[name][1]
    assert model.floating_base is default
    assert model.nj > 0


def _erd_urdf_files():
    """Every .urdf file of the installed example-robot-data, relative to its robots/ directory."""
    if not _erd_installed():
        return ["(example-robot-data not installed)"]
    root = example_robot_data_dir()
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.urdf"))


def _pinocchio_joint_names(pm, first):
    """Pinocchio's joint names in its order, a planar joint split as ours is (<j>_x, <j>_y, <j>_rot)."""
    names = []
    for j in range(first, pm.njoints):
        kind, name = pm.joints[j].shortname(), pm.names[j]
        if kind == "JointModelPlanar":
            names += [f"{name}_x", f"{name}_y", f"{name}_rot"]
        else:
            assert pm.nvs[j] == 1, f"Pinocchio joint '{name}' is a {kind} (nv={pm.nvs[j]})"
            names.append(name)
    return names


NAMES_LINK_OR_JOINT = r"(link|joint|body) '[^']+'"


@pytest.mark.filterwarnings(*DATA_WARNINGS)
@pytest.mark.parametrize("rel", _erd_urdf_files())
def test_every_example_robot_data_urdf_that_pinocchio_loads_loads(rel):
    """Every URDF of example-robot-data that Pinocchio's buildModelFromUrdf loads loads
    here too (floating base, as Pinocchio with a JointModelFreeFlyer root): strictly, or, where
    the strict loader refuses physically invalid dynamics with an error naming the link/joint,
    with validate=False and a warning naming it. Same DoFs, joint names and order, total mass.
    (With example-robot-data 6.0.0 the opt-out is needed by romeo_laas_small: indefinite inertia
    tensors, massless grippers; and romeo: massless finger subtrees.)"""
    if not _erd_installed():
        pytest.skip("example-robot-data is not installed (pip install example-robot-data)")
    path = example_robot_data_dir() / rel
    try:
        pm = pin_model(path, True)
    except Exception:  # e.g. ur3.urdf: <robot> without a name, which urdfdom refuses
        # not a URDF Pinocchio loads: ours must refuse it too, with an error saying why
        with pytest.raises(ValueError, match="invalid URDF"):
            load_urdf(path, floating_base=True, validate=False)
        return
    try:
        model = load_urdf(path, floating_base=True)
        assert model.strict is True
    except ValueError as e:
        assert re.search(NAMES_LINK_OR_JOINT, str(e)), f"{rel}: the error names no link or joint: {e}"
        with pytest.warns(UserWarning) as record:
            model = load_urdf(path, floating_base=True, validate=False)
        messages = [str(w.message) for w in record]
        assert any(re.search(NAMES_LINK_OR_JOINT, m) and "validate=False" in m for m in messages), messages
        assert model.strict is False
        print(f"{rel}: needs validate=False: {e}")
    assert model.nv == pm.nv and model.nj == pm.nv - 6, f"{rel}: {model.nj} joints, Pinocchio nv={pm.nv}"
    assert model.joint_names == _pinocchio_joint_names(pm, first=2)
    pin_mass = sum(pm.inertias[j].mass for j in range(pm.njoints))
    assert model.total_mass() == pytest.approx(pin_mass, rel=1e-12, abs=1e-12)


def test_known_robot_list():
    required = {"solo12", "anymal_c", "hyq", "ur5", "panda", "kinova", "icub", "romeo_laas_small", "pr2",
                "talos", "g1_29dof", "go1", "a1", "tiago", "quadruped"}
    assert required <= set(ROBOT_NAMES)
    assert KNOWN_ROBOTS["g1_29dof"][0] == "g1_description/urdf/g1_29dof_rev_1_0.urdf"
    assert KNOWN_ROBOTS["solo12"][1] is True and KNOWN_ROBOTS["ur5"][1] is False


# ---------------------------------------------------------------------------------------------
# The bundled quadruped
# ---------------------------------------------------------------------------------------------
def test_bundled_quadruped_is_physical():
    path = robot_urdf_path("quadruped")
    assert path.is_file() and path.parent.name == "data"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the model warns about physically inconsistent inertias
        model = load_urdf(path, validate=False)
    assert model.name == "sva_quadruped" and model.base_name == "base"
    assert model.nj == 12 and model.nv == 18
    assert 12.0 <= model.total_mass() <= 15.0
    assert 6.0 <= model.base_inertia[0, 0] <= 8.0
    for leg in ("LF", "RF", "LH", "RH"):
        hips = model.bodies[model.joint_index(f"{leg}_HAA")]
        assert np.allclose(hips.joint.axis, [1, 0, 0])
        for j in ("HFE", "KFE"):
            assert np.allclose(model.bodies[model.joint_index(f"{leg}_{j}")].joint.axis, [0, 1, 0])
    # The 50 g feet are merged into the shanks: the shank body carries 0.18 + 0.05 kg.
    assert model.bodies[model.joint_index("LF_KFE")].inertia[0, 0] == pytest.approx(0.23)


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------
IN = ('<inertial><mass value="{m}"/>'
      '<inertia ixx="{i}" iyy="{i}" izz="{i}" ixy="0" ixz="0" iyz="0"/></inertial>')


def link(name, mass=1.0, inertia=0.01, inertial=None):
    body = IN.format(m=mass, i=inertia) if inertial is None else inertial
    return f'<link name="{name}">{body}</link>'


def joint(name, parent, child, jtype="revolute", axis="0 0 1", xyz="0 0 0.1", rpy="0 0 0", extra=""):
    limited = jtype in ("revolute", "prismatic")  # urdfdom (Pinocchio) requires <limit> for these
    limit = '<limit effort="10" velocity="10" lower="-1" upper="1"/>' if limited else ""
    ax = f'<axis xyz="{axis}"/>' if axis is not None else ""
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="{rpy}"/>{ax}{limit}{extra}</joint>')


def robot(*parts, name="t"):
    return f'<robot name="{name}">' + "".join(parts) + "</robot>"


def two_link(**joint_kw):
    return robot(link("base"), link("l1"), joint("j1", "base", "l1", **joint_kw))


def test_a_urdf_rooted_at_world_is_a_fixed_base_by_default():
    """A root link named `world` (an arm fixed to the world, as MoveIt and Gazebo descriptions
    write it) loads as a fixed base unless floating_base says otherwise; any other root link floats.
    Real robot: example-robot-data's ur5_robot.urdf."""
    world = robot(link("world", mass=0.0, inertia=0.0), link("base"), link("l1"),
                  joint("fix", "world", "base", jtype="fixed", axis=None), joint("j1", "base", "l1"))
    assert load_urdf(world).floating_base is False and load_urdf(world).nv == 1
    assert load_urdf(world, floating_base=True).floating_base is True
    assert load_urdf(two_link()).floating_base is True
    assert load_urdf(two_link(), floating_base=False).floating_base is False
    ur5 = sl.load_urdf(robot_urdf_path("ur5"))            # the public API's default agrees
    assert ur5.base_name == "world" and not ur5.floating_base and ur5.nv == 6
    solo = sl.load_urdf(robot_urdf_path("solo12"))
    assert solo.floating_base and solo.nv == 18


def test_path_str_bytes_and_xml_string_give_the_same_model(tmp_path):
    xml = '<?xml version="1.0" encoding="UTF-8"?>\n' + two_link()
    f = tmp_path / "r.urdf"
    f.write_text(xml)
    models = [load_urdf(xml), load_urdf("  \n" + xml.encode().decode()), load_urdf(f), load_urdf(str(f)),
              load_urdf(xml.encode())]
    for m in models:
        assert m.joint_names == ["j1"] and m.base_name == "base" and m.name == "t"
        np.testing.assert_array_equal(m.bodies[0].inertia, models[0].bodies[0].inertia)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-8-sig"])
def test_encodings_with_byte_order_mark(tmp_path, encoding):
    f = tmp_path / "r.urdf"
    declared = {"utf-16": "UTF-16", "utf-32": "UTF-32", "utf-8-sig": "UTF-8"}[encoding]
    f.write_bytes(f'<?xml version="1.0" encoding="{declared}"?>\n{two_link()}'.encode(encoding))
    assert load_urdf(f).joint_names == ["j1"]
    f.write_bytes(BILLION_LAUGHS.replace('<?xml version="1.0"?>', "").encode(encoding))
    with pytest.raises(ValueError, match="must not contain a DTD"):
        load_urdf(f)


def test_gravity_and_base_options():
    m = load_urdf(two_link(), floating_base=False, gravity=(0, 0, -1.62))
    assert not m.floating_base and m.nv == 1
    np.testing.assert_array_equal(m.gravity, [0, 0, -1.62])
    np.testing.assert_allclose(m.base_inertia[0, 0], 1.0)  # root link inertia kept even when welded


def test_elements_the_dynamics_do_not_need_are_stripped():
    """Visuals, collisions, materials (a <texture> without filename: iCub, Romeo), old-style
    transmissions (PR2), gazebo, sensors, xacro leftovers and unknown elements are ignored."""
    xml = f'''<robot name="t" xmlns:xacro="http://www.ros.org/wiki/xacro">
      <material name="grey"><color rgba="0.5 0.5 0.5 1"/><texture/></material>
      <link name="base">
        {IN.format(m=2, i=0.1)}
        <visual><geometry><mesh filename="package://nowhere/base.stl"/></geometry>
          <material name="m"><texture/></material></visual>
        <collision><geometry><box size="1 1 1"/></geometry></collision>
        <self_collide>true</self_collide>
      </link>
      {link("l1")}
      {joint("j1", "base", "l1", extra='<dynamics damping="0.1"/><safety_controller k_velocity="1"/>'
             '<calibration rising="0"/>')}
      <transmission type="pr2_mechanism_model/SimpleTransmission" name="t1">
        <actuator name="m1"/><joint name="j1"/><mechanicalReduction>1</mechanicalReduction>
      </transmission>
      <gazebo reference="l1"><sensor name="s" type="camera"/></gazebo>
      <sensor name="imu" update_rate="100"><parent link="base"/></sensor>
      <xacro:property name="x" value="1"/>
      <something_unknown/>
    </robot>'''
    m = load_urdf(xml)
    assert m.joint_names == ["j1"]
    assert_matches_pinocchio(m, pin_model(xml, True, xml=True))


def test_joint_order_is_pinocchios():
    """Depth-first from the root, a link's child joints in name order (urdfdom's std::map)."""
    xml = robot(link("base"), link("c"), link("a"), link("b"), link("d"), link("e"),
                joint("zz", "base", "c"), joint("yy", "base", "a"), joint("aa", "c", "b"),
                joint("bb", "base", "d"), joint("f_fixed", "base", "e", jtype="fixed"),
                link("g"), joint("a_under_fixed", "e", "g"))
    m = load_urdf(xml)
    assert m.joint_names == ["bb", "a_under_fixed", "yy", "zz", "aa"]
    assert_matches_pinocchio(m, pin_model(xml, True, xml=True))


# ---------------------------------------------------------------------------------------------
# Semantics: axes, inertial rpy, fixed-joint merge, planar, mimic
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("jtype,axis", [("revolute", "0 0 -2"), ("continuous", "1 1 0"),
                                        ("prismatic", "0 3 4"), ("revolute", None)])
def test_joint_types_and_axes(jtype, axis):
    xml = two_link(jtype=jtype, axis=axis, rpy="0.3 -0.2 1.1")
    m = load_urdf(xml, floating_base=False)
    j = m.bodies[0].joint
    assert j.kind == (PRISMATIC if jtype == "prismatic" else REVOLUTE)
    expected = np.array([1.0, 0, 0]) if axis is None else np.array(axis.split(), dtype=float)
    np.testing.assert_allclose(j.axis, expected / np.linalg.norm(expected))
    assert_matches_pinocchio(m, pin_model(xml, False, xml=True))


def test_links_without_inertial_have_zero_inertia():
    xml = robot(link("base"), '<link name="l1"/>', link("l2"), joint("j1", "base", "l1"),
                joint("j2", "l1", "l2", axis="0 1 0"))
    m = load_urdf(xml)
    np.testing.assert_array_equal(m.bodies[0].inertia, np.zeros((6, 6)))
    assert_matches_pinocchio(m, pin_model(xml, True, xml=True))


def test_inertial_origin_rotates_the_inertia_tensor():
    inertial = ('<inertial><origin xyz="0.1 -0.2 0.3" rpy="0.4 0.5 0.6"/><mass value="2"/>'
                '<inertia ixx="0.3" iyy="0.2" izz="0.15" ixy="0.01" ixz="-0.02" iyz="0.03"/></inertial>')
    xml = robot(link("base"), link("l1", inertial=inertial), joint("j1", "base", "l1"))
    m = load_urdf(xml)
    R = rpy_to_matrix((0.4, 0.5, 0.6))
    I = np.array([[0.3, 0.01, -0.02], [0.01, 0.2, 0.03], [-0.02, 0.03, 0.15]])
    c = skew(np.array([0.1, -0.2, 0.3]))
    np.testing.assert_allclose(m.bodies[0].inertia[3:, 3:], R @ I @ R.T - 2 * c @ c, atol=1e-14)
    np.testing.assert_allclose(m.bodies[0].inertia[3:, :3], 2 * c, atol=1e-14)
    assert_matches_pinocchio(m, pin_model(xml, True, xml=True))


def _combined_inertial(m1, c1, I1, m2, c2, I2):
    """<inertial> of two point-free rigid bodies given about their COMs in one frame (by hand)."""
    m = m1 + m2
    c = (m1 * c1 + m2 * c2) / m
    def shifted(mi, ci, Ii):  # parallel axis theorem to the combined COM
        d = ci - c
        return Ii + mi * (d @ d * np.eye(3) - np.outer(d, d))
    I = shifted(m1, c1, I1) + shifted(m2, c2, I2)
    f = "{:.17g}".format
    return (f'<inertial><origin xyz="{f(c[0])} {f(c[1])} {f(c[2])}"/><mass value="{f(m)}"/>'
            f'<inertia ixx="{f(I[0, 0])}" iyy="{f(I[1, 1])}" izz="{f(I[2, 2])}" ixy="{f(I[0, 1])}" '
            f'ixz="{f(I[0, 2])}" iyz="{f(I[1, 2])}"/></inertial>')


def test_fixed_joint_merge_equals_hand_merged_inertia_and_pinocchio():
    """l1 carries l2 on a fixed joint (offset and rotated), and l2 carries l3 on a revolute joint:
    the body 'j1' must have l1 + l2's inertia, and j3's placement must be composed through the
    fixed joint."""
    l1 = ('<inertial><origin xyz="0 0 -0.1"/><mass value="1.5"/>'
          '<inertia ixx="0.02" iyy="0.03" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>')
    l2 = ('<inertial><origin xyz="0.05 0.01 0" rpy="0 0 0.3"/><mass value="0.4"/>'
          '<inertia ixx="0.002" iyy="0.001" izz="0.0025" ixy="0" ixz="0" iyz="0"/></inertial>')
    fixed_xyz, fixed_rpy = np.array([0.1, 0.0, -0.2]), (0.0, np.pi / 2, 0.0)
    merged_urdf = robot(
        link("base"), link("l1", inertial=l1), link("l2", inertial=l2), link("l3"),
        joint("j1", "base", "l1"),
        joint("fix", "l1", "l2", jtype="fixed", xyz="0.1 0 -0.2", rpy=f"0 {np.pi / 2!r} 0"),
        joint("j3", "l2", "l3", axis="1 0 0", xyz="0 0 0.3"))

    # By hand: l2's COM and inertia in l1's frame, added to l1's.
    R = rpy_to_matrix(fixed_rpy)
    R2 = rpy_to_matrix((0, 0, 0.3))
    c2 = R @ np.array([0.05, 0.01, 0.0]) + fixed_xyz
    I2 = R @ R2 @ np.diag([0.002, 0.001, 0.0025]) @ R2.T @ R.T
    by_hand = _combined_inertial(1.5, np.array([0, 0, -0.1]), np.diag([0.02, 0.03, 0.01]), 0.4, c2, I2)
    hand_urdf = robot(link("base"), link("l1", inertial=by_hand), link("l3"), joint("j1", "base", "l1"),
                      joint("j3", "l1", "l3", axis=" ".join(repr(float(x)) for x in R @ [1, 0, 0]),
                            xyz=" ".join(repr(float(x)) for x in R @ [0, 0, 0.3] + fixed_xyz)))
    merged, hand = load_urdf(merged_urdf), load_urdf(hand_urdf)
    assert merged.joint_names == ["j1", "j3"]
    np.testing.assert_allclose(merged.bodies[0].inertia, hand.bodies[0].inertia, rtol=0, atol=1e-12)
    assert merged.bodies[0].inertia[0, 0] == pytest.approx(1.9)
    # j3's frame: the fixed joint's pose composed with j3's origin.
    np.testing.assert_allclose(merged.bodies[1].placement_R, R, atol=1e-15)
    np.testing.assert_allclose(merged.bodies[1].placement_p, R @ [0, 0, 0.3] + fixed_xyz, atol=1e-15)
    assert_matches_pinocchio(merged, pin_model(merged_urdf, True, xml=True))


def test_fixed_links_under_the_root_merge_into_the_base():
    xml = robot(link("world", mass=0.0, inertia=0.0), link("base", mass=3.0), link("l1"),
                joint("weld", "world", "base", jtype="fixed", xyz="0 0 1"), joint("j1", "base", "l1"))
    for floating in (True, False):
        m = load_urdf(xml, floating_base=floating)
        assert m.base_name == "world" and m.base_inertia[0, 0] == pytest.approx(3.0)
        np.testing.assert_allclose(m.bodies[0].placement_p, [0, 0, 1.1])
        assert_matches_pinocchio(m, pin_model(xml, floating, xml=True))


def test_planar_joint_becomes_x_y_rot():
    xml = robot(link("base"), link("slider", mass=2.0, inertia=0.05), link("arm"),
                joint("p", "base", "slider", jtype="planar", xyz="0.1 0.2 0.3", rpy="0.1 0.2 0.3"),
                joint("j2", "slider", "arm", axis="0 1 0"))
    m = load_urdf(xml, floating_base=False)
    assert m.joint_names == ["p_x", "p_y", "p_rot", "j2"]
    bx, by, br = m.bodies[:3]
    assert (bx.joint.kind, by.joint.kind, br.joint.kind) == (PRISMATIC, PRISMATIC, REVOLUTE)
    np.testing.assert_allclose([bx.joint.axis, by.joint.axis, br.joint.axis], np.eye(3))
    assert [m.parent_name(n) for n in m.joint_names] == ["base", "p_x", "p_y", "p_rot"]
    assert not bx.inertia.any() and not by.inertia.any()  # massless intermediate bodies

    # Against Pinocchio's JointModelPlanar (q = x, y, cos, sin): same inertia, same child pose.
    pm = pin_model(xml, False, xml=True)
    jp = pm.getJointId("p")
    np.testing.assert_allclose(br.inertia, pm.inertias[jp].matrix(), atol=TOL)
    np.testing.assert_allclose(m.bodies[3].inertia, pm.inertias[pm.getJointId("j2")].matrix(), atol=TOL)
    data = pm.createData()
    x, y, th, s2 = 0.3, -0.7, 1.1, 0.4
    q = np.array([x, y, np.cos(th), np.sin(th), s2])
    pin.forwardKinematics(pm, data, q)
    X = np.eye(6)  # ^{body}X_{world}, composed down the chain
    for body, s in zip(m.bodies, (x, y, th, s2)):
        XJ, _ = body.joint.jcalc(s)
        X = XJ @ placement_to_xform(body.placement_R, body.placement_p) @ X
        if body.name in ("p_rot", "j2"):
            oMi = data.oMi[pm.getJointId("p" if body.name == "p_rot" else "j2")]
            expected = oMi.inverse().toActionMatrix()
            np.testing.assert_allclose(X, expected, atol=1e-12, err_msg=body.name)


def test_planar_joint_with_another_normal():
    m = load_urdf(two_link(jtype="planar", axis="1 0 0"), floating_base=False)
    ax = [b.joint.axis for b in m.bodies]
    np.testing.assert_allclose(ax[2], [1, 0, 0])
    np.testing.assert_allclose(np.cross(ax[0], ax[1]), ax[2], atol=1e-15)  # right-handed, in the plane


def test_planar_names_must_not_clash():
    xml = robot(link("base"), link("l1"), link("l2"), joint("p", "base", "l1", jtype="planar"),
                joint("p_x", "l1", "l2"))
    with pytest.raises(ValueError, match="'p_x'"):
        load_urdf(xml)


def test_mimic_joints_are_independent_dofs():
    xml = robot(link("base"), link("f1", mass=0.1), link("f2", mass=0.1),
                joint("finger1", "base", "f1", jtype="prismatic", axis="0 1 0"),
                joint("finger2", "base", "f2", jtype="prismatic", axis="0 -1 0",
                      extra='<mimic joint="finger1" multiplier="1" offset="0"/>'))
    m = load_urdf(xml, floating_base=False)
    assert m.joint_names == ["finger1", "finger2"] and m.nv == 2
    assert_matches_pinocchio(m, pin_model(xml, False, xml=True))  # Pinocchio's default (mimic=False)


# ---------------------------------------------------------------------------------------------
# Errors: ValueError naming the offending element
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,match", [
    ("<robot name='t'><link name='a'>", "not well-formed"),
    ("<robot name='t'><link name='a'></robot>", "not well-formed"),
    ("this is not a urdf", "neither URDF XML"),
    ("", "neither URDF XML"),
])
def test_not_xml(text, match):
    with pytest.raises(ValueError, match=match):
        load_urdf(text)


def test_not_xml_file(tmp_path):
    f = tmp_path / "junk.urdf"
    f.write_bytes(b"\x00\x01 binary junk")
    with pytest.raises(ValueError, match="not well-formed"):
        load_urdf(f)
    with pytest.raises(FileNotFoundError):
        load_urdf(tmp_path / "missing.urdf")


def test_no_robot_element():
    with pytest.raises(ValueError, match=r"no <robot> root element \(found <sdf>\)"):
        load_urdf("<sdf version='1.6'><model name='m'/></sdf>")


def test_no_links():
    with pytest.raises(ValueError, match="no links"):
        load_urdf('<robot name="empty"/>')


def test_more_than_one_root():
    with pytest.raises(ValueError, match="more than one root link.*base.*loose"):
        load_urdf(robot(link("base"), link("l1"), link("loose"), joint("j1", "base", "l1")))


def test_cycle():
    xml = robot(link("base"), link("a"), link("b"), joint("j0", "base", "a"), joint("jab", "a", "b"),
                link("c"), link("d"), joint("jcd", "c", "d"), joint("jdc", "d", "c"))
    with pytest.raises(ValueError, match="jcd, jdc form a cycle"):
        load_urdf(xml)
    with pytest.raises(ValueError, match="cycle.*jab.*jba"):  # no root at all
        load_urdf(robot(link("a"), link("b"), joint("jab", "a", "b"), joint("jba", "b", "a")))
    with pytest.raises(ValueError, match="'jself' connects link 'a' to itself"):
        load_urdf(robot(link("base"), link("a"), joint("j", "base", "a"), joint("jself", "a", "a")))


def test_joint_references_missing_link():
    with pytest.raises(ValueError, match="joint 'j1' references missing child link 'ghost'"):
        load_urdf(robot(link("base"), joint("j1", "base", "ghost")))
    with pytest.raises(ValueError, match="joint 'j1' references missing parent link 'nobody'"):
        load_urdf(robot(link("base"), link("l1"), joint("j1", "nobody", "l1")))


def test_link_with_two_parent_joints():
    xml = robot(link("base"), link("a"), link("c"), joint("ja", "base", "a"), joint("j1", "base", "c"),
                joint("j2", "a", "c"))
    with pytest.raises(ValueError, match="link 'c' has two parent joints: 'j1' and 'j2'"):
        load_urdf(xml)


def test_duplicate_names():
    with pytest.raises(ValueError, match="link 'l1' is defined twice"):
        load_urdf(robot(link("base"), link("l1"), link("l1"), joint("j1", "base", "l1")))
    with pytest.raises(ValueError, match="joint 'j1' is defined twice"):
        load_urdf(robot(link("base"), link("l1"), link("l2"), joint("j1", "base", "l1"),
                        joint("j1", "base", "l2")))


def test_negative_mass():
    with pytest.raises(ValueError, match="link 'l1': negative mass"):
        load_urdf(robot(link("base"), link("l1", mass=-1.0), joint("j1", "base", "l1")))


def test_inertia_not_positive_semidefinite():
    bad = ('<inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="-0.1" ixy="0" ixz="0" iyz="0"/>'
           '</inertial>')
    with pytest.raises(ValueError, match="link 'l1': inertia tensor is not positive semi-definite"):
        load_urdf(robot(link("base"), link("l1", inertial=bad), joint("j1", "base", "l1")))
    bad = ('<inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0.5" ixz="0" iyz="0"/>'
           '</inertial>')
    with pytest.raises(ValueError, match="link 'l1': inertia tensor is not positive semi-definite"):
        load_urdf(robot(link("base"), link("l1", inertial=bad), joint("j1", "base", "l1")))


def test_indefinite_link_welded_to_a_heavy_body_only_warns():
    """As in TIAGo: a tiny link with a slightly indefinite tensor, fixed to a heavy body."""
    tiny = ('<inertial><mass value="1e-3"/><inertia ixx="1e-8" iyy="1e-8" izz="1e-8" ixy="2e-8" ixz="0" '
            'iyz="0"/></inertial>')
    xml = robot(link("base"), link("l1"), link("antenna", inertial=tiny), joint("j1", "base", "l1"),
                joint("fix", "l1", "antenna", jtype="fixed"))
    with pytest.warns(UserWarning, match="link 'antenna': inertia tensor is not positive semi-definite.*"
                                         "accepted because body 'j1'"):
        m = load_urdf(xml)
    assert m.bodies[0].inertia[0, 0] == pytest.approx(1.001)


@pytest.mark.parametrize("xml,match", [
    (robot(link("base"), link("l1", mass="nan"), joint("j1", "base", "l1")), "link 'l1': mass is NaN"),
    (robot(link("base"), link("l1", inertia="NaN"), joint("j1", "base", "l1")),
     "link 'l1': inertia tensor has NaN"),
    (two_link(xyz="0 nan 0"), "joint 'j1' <origin xyz>: NaN"),
    (two_link(rpy="inf 0 0"), "joint 'j1' <origin rpy>: NaN"),
    (two_link(axis="nan 0 1"), "joint 'j1' <axis>: NaN"),
    (robot(link("base"), link("l1", inertial='<inertial><origin xyz="nan 0 0"/><mass value="1"/></inertial>'),
           joint("j1", "base", "l1")), "link 'l1' <inertial> <origin xyz>: NaN"),
])
def test_nan(xml, match):
    with pytest.raises(ValueError, match=match):
        load_urdf(xml)


def test_zero_axis():
    with pytest.raises(ValueError, match="joint 'j1': <axis> is zero"):
        load_urdf(two_link(axis="0 0 0"))


def test_malformed_numbers_name_the_element():
    with pytest.raises(ValueError, match="link 'l1': <mass value=\"heavy\"> must be 1 number"):
        load_urdf(robot(link("base"), link("l1", mass="heavy"), joint("j1", "base", "l1")))
    with pytest.raises(ValueError, match="joint 'j1': <origin xyz=\"0 0\"> must be 3 numbers"):
        load_urdf(two_link(xyz="0 0"))


@pytest.mark.parametrize("jtype", ["ball", "spherical", "unknown", "screw"])
def test_unsupported_joint_type(jtype):
    with pytest.raises(ValueError, match=f"joint 'j1' has unsupported type '{jtype}'"):
        load_urdf(two_link(jtype=jtype))


def test_floating_joint_is_rejected():
    xml = robot(link("world"), link("pelvis"), link("l1"), joint("floating_base_joint", "world", "pelvis",
                jtype="floating"), joint("j1", "pelvis", "l1"))
    with pytest.raises(ValueError, match="joint 'floating_base_joint'.*floating_base=True"):
        load_urdf(xml)


MASSLESS_TIP = robot(link("base"), link("l1"), '<link name="tip"/>', '<link name="tip2"/>',
                     joint("j1", "base", "l1"), joint("j_tip", "l1", "tip", axis="0 1 0"),
                     joint("j_tip2", "tip", "tip2", axis="1 0 0"))


def test_massless_subtree_makes_the_mass_matrix_singular():
    """Caught by Model.validate() (called by load_urdf), naming the joint; validate=False warns
    once per massless subtree, naming its topmost joint and the joints below it."""
    with pytest.raises(ValueError, match="joint 'j_tip'"):
        load_urdf(MASSLESS_TIP)
    with pytest.warns(UserWarning) as record:
        model = load_urdf(MASSLESS_TIP, validate=False)
    messages = [str(w.message) for w in record]
    assert len(messages) == 1, messages
    assert re.search(r"joint 'j_tip': .*massless subtree.*joints below it: j_tip2", messages[0])
    assert model.nj == 3 and model.strict is False


def test_lenient_model_computes_what_needs_no_inverse_and_raises_at_run_time():
    """validate=False: M and inverse dynamics are computed; what needs M^-1 raises, naming a joint
    of the massless subtree (algorithms._check_pivots)."""
    import sva_linearizer as sl

    with pytest.warns(UserWarning):
        model = load_urdf(MASSLESS_TIP, validate=False)
    state = sl.State.from_vectors(model, np.r_[0, 0, 0, 0, 0, 0, 1, 0.3, -0.2, 0.1], np.zeros(model.nv))
    M = sl.mass_matrix(model, state)
    assert M.shape == (9, 9) and abs(np.linalg.det(M[6:, 6:])) < 1e-12 and M[6, 6] > 0
    assert np.all(np.isfinite(sl.extended_inverse_dynamics(model, state, np.zeros(9))))
    assert all(np.all(np.isfinite(D)) for D in
               sl.extended_inverse_dynamics_derivatives(model, state, np.zeros(9)))


@pytest.mark.parametrize("name", ["massless_tip", "romeo_laas_small"])
def test_lenient_model_forward_dynamics_names_the_joint(name):
    """validate=False: forward dynamics at a configuration where M is singular (here: every
    configuration, a massless subtree) raises a ValueError naming a joint of the subtree."""
    import sva_linearizer as sl

    if name == "romeo_laas_small":
        _needs_erd(name)
        src, joints = robot_urdf_path(name), "[lr]_gripper_joint"
    else:
        src, joints = MASSLESS_TIP, "j_tip2?"
    with pytest.warns(UserWarning):
        model = load_urdf(src, validate=False)
    rng = np.random.default_rng(1)
    state = sl.State.from_vectors(model, np.r_[0, 0, 0, 0, 0, 0, 1, rng.uniform(-1, 1, model.nj)],
                                  np.zeros(model.nv))
    with pytest.raises(ValueError, match=f"mass matrix is singular.*joint '{joints}'"):
        sl.forward_dynamics(model, state, np.zeros(model.nj))
    with pytest.raises(ValueError, match=f"mass matrix is singular.*joint '{joints}'"):
        sl.linearize(model, state, np.zeros(model.nj))


def test_lenient_negative_mass_and_indefinite_inertia_warn():
    bad = ('<inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="-0.1" ixy="0" ixz="0" iyz="0"/>'
           '</inertial>')
    xml = robot(link("base"), link("l1", inertial=bad), link("l2", mass=-0.5),
                joint("j1", "base", "l1"), joint("j2", "l1", "l2"))
    with pytest.raises(ValueError, match="link 'l2': negative mass -0.5"):  # strict: the first error
        load_urdf(xml)
    with pytest.warns(UserWarning) as record:
        model = load_urdf(xml, validate=False)
    messages = "\n".join(str(w.message) for w in record)
    assert re.search(r"link 'l1': inertia tensor is not positive semi-definite.*validate=False", messages)
    assert re.search(r"link 'l2': negative mass -0.5; accepted because .*validate=False", messages)
    assert model.bodies[1].inertia[0, 0] == -0.5  # the numbers as given, as Pinocchio takes them


# ---------------------------------------------------------------------------------------------
# Hostile XML
# ---------------------------------------------------------------------------------------------
BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE robot [
  <!ENTITY lol "lol">
  <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
  <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
  <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
  <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
  <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
  <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
  <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<robot name="&lol9;"><link name="&lol9;"/></robot>"""


def test_billion_laughs_is_rejected_quickly():
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="must not contain a DTD or entity declarations"):
        load_urdf(BILLION_LAUGHS)
    assert time.perf_counter() - t0 < 1.0


def test_external_entity_is_not_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    xml = (f'<!DOCTYPE robot [<!ENTITY xxe SYSTEM "{secret.as_uri()}">]>'
           '<robot name="&xxe;"><link name="base"/></robot>')
    with pytest.raises(ValueError, match="must not contain a DTD") as exc:
        load_urdf(xml)
    assert "TOP-SECRET" not in str(exc.value)
    f = tmp_path / "hostile.urdf"
    f.write_text(xml)
    with pytest.raises(ValueError, match="must not contain a DTD"):
        load_urdf(f)


@pytest.mark.parametrize("doctype", [
    '<!DOCTYPE robot SYSTEM "http://example.invalid/urdf.dtd">',
    '<!DOCTYPE robot [<!ENTITY % remote SYSTEM "http://example.invalid/x.dtd"> %remote;]>',
    "<!DOCTYPE robot>",
])
def test_any_doctype_is_rejected_without_network(doctype):
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="must not contain a DTD"):
        load_urdf(doctype + robot(link("base"), link("l1"), joint("j1", "base", "l1")))
    assert time.perf_counter() - t0 < 1.0


# ---------------------------------------------------------------------------------------------
# sva_linearizer.robots
# ---------------------------------------------------------------------------------------------
def test_unknown_robot_lists_known_names():
    with pytest.raises(ValueError, match="unknown robot 'wall-e'; known robots: .*quadruped.*solo12"):
        robot_urdf_path("wall-e")
    with pytest.raises(ValueError, match="unknown robot"):
        load_robot("wall-e")


def _hide_example_robot_data(monkeypatch):
    monkeypatch.delenv("EXAMPLE_ROBOT_DATA_DIR", raising=False)
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "site-packages" not in p])
    monkeypatch.setattr(robots.site, "getsitepackages", lambda: [])


def test_missing_example_robot_data(monkeypatch):
    _hide_example_robot_data(monkeypatch)
    with pytest.raises(ValueError, match="pip install example-robot-data"):
        robot_urdf_path("solo12")
    assert robot_urdf_path("quadruped").is_file()  # bundled: needs nothing else


def test_example_robot_data_dir_env_var(monkeypatch):
    _needs_erd("solo12")
    real = example_robot_data_dir()
    _hide_example_robot_data(monkeypatch)
    for value in (real, real.parent):  # the robots/ directory or the one above it
        monkeypatch.setenv("EXAMPLE_ROBOT_DATA_DIR", str(value))
        assert robot_urdf_path("solo12") == real / KNOWN_ROBOTS["solo12"][0]
    monkeypatch.setenv("EXAMPLE_ROBOT_DATA_DIR", str(real / "no-such-dir"))
    with pytest.raises(ValueError, match="EXAMPLE_ROBOT_DATA_DIR=.*no-such-dir is not a directory"):
        robot_urdf_path("solo12")


def test_load_robot_base_override():
    m = load_robot("quadruped", floating_base=False, gravity=(0, 0, -3.7))
    assert not m.floating_base and m.nv == 12
    np.testing.assert_array_equal(m.gravity, [0, 0, -3.7])
    assert isinstance(robot_urdf_path("quadruped"), pathlib.Path)
