# SPDX-License-Identifier: BSD-3-Clause
"""The node's parameters: their names, defaults and ROS 2 types, and the checks every value goes
through, whichever way it arrives (rclpy, a parameter file, ``-p``, the launch file).

* :data:`DEFAULT_PARAMETERS` - name -> default (also the keys of ``config/<robot>.yaml``);
* :data:`PARAMETER_TYPES` - name -> ROS 2 type, as the rclpy transport declares it;
* :func:`normalize_parameters` - defaults filled in, every value coerced and checked (ValueError
  naming the parameter); :func:`typed_parameter_value` - one value in its declared type;
* :func:`contact_specs` - the configured contacts as ``sl.Contact`` objects.

docs/ros.md ("Parameters", "Contacts in the node") describes each parameter for users. Reading
parameter files and ``--ros-args`` is :mod:`.parameter_files`.
"""
from __future__ import annotations

import math

import sva_linearizer as sl

from .record import SECTIONS

#: The node's default name (parameter files and ``/**`` wildcards are matched against it).
NODE_NAME = "sva_linearizer"

#: Parameter name -> default. These are also the keys of config/<robot>.yaml.
DEFAULT_PARAMETERS = {
    "robot_description": "",      # URDF XML (takes precedence)
    "urdf_path": "",              # path to a URDF file
    "robot": "",                  # a robot name known to sva_linearizer.robots (e.g. solo12)
    # used when none of the above is set; relative (in the node's namespace), as robot_state_publisher publishes it
    "robot_description_topic": "robot_description",
    "floating_base": "auto",      # true: SE(3) base from odom; false: fixed base, no odom; auto: the
                                  # named robot's default, else fixed when the URDF's root link is
                                  # `world`, else true
    "gravity": [0.0, 0.0, -9.81],  # world frame
    "max_rate": 0.0,              # Hz, by input stamp; 0: every joint state the node gets to
    "max_odom_age": 0.1,          # s, |joint state stamp - odom stamp| allowed
    "odom_wait": 0.002,           # s a joint state waits for the odometry of its own stamp; then the
                                  # nearest sample within max_odom_age
    "quaternion_tolerance": 1e-3,  # |norm - 1| allowed (then normalised); beyond: rejected
    "time_reset_threshold": 1.0,  # s; a larger step back in stamps is a clock reset
    "warn_period": 2.0,           # s between two warnings of the same kind; 0: no throttling
    "ignore_unknown_joints": False,  # true: names not in the model are ignored instead of rejected
    "allow_empty_velocity_effort": True,  # empty JointState velocity / effort: zero; false: dropped
    "joint_states_topic": "joint_states",
    "odom_topic": "odom",
    "base_frame": "",             # odometry's child_frame_id; empty: the URDF's root link
    "odom_frame": "",             # odometry's header.frame_id (the world frame); empty: any
    # contacts (docs/ros.md, "Contacts in the node"): parallel arrays, one entry per contact frame;
    # the per-contact arrays also take one value (for every contact) or none (the default)
    "contact_frames": [],         # frame names (URDF links, e.g. the feet); empty: no contacts
    "contact_kinds": [],          # "point" | "6d"; default point
    "contact_references": [],     # "local" | "world_aligned"; default local
    "contact_offsets": [],        # 3 per contact, flat (x, y, z in the link frame); default zeros
    "contact_baumgarte_kp": [],   # Baumgarte Kp per contact; default 0.0
    "contact_baumgarte_kd": [],   # Baumgarte Kd per contact; default 0.0
    "contact_mode": "rigid",      # rigid: contacts as constraints (KKT); forces: contact forces as inputs
    "contacts_default_active": True,  # every configured contact is active until a contact set arrives
    "contacts_topic": "contacts",              # sensor_msgs/JointState: the active contact set
    "contact_forces_topic": "contact_forces",  # geometry_msgs/WrenchStamped per contact (mode forces)
    "max_contacts_age": 0.1,      # s, |joint state stamp - contact set / force stamp| allowed
    # closed loops (docs/loops.md), always active: parallel arrays, one entry per loop (per-loop arrays
    # also take one entry for all, or none for the default), and mimic joints
    "loop_frames_a": [],          # the first frame of each loop
    "loop_frames_b": [],          # the second frame of each loop
    "loop_kinds": [],             # "point" | "revolute" | "6d"; default point
    "loop_references": [],        # "local" | "world_aligned"; default local
    "loop_offsets_a": [],         # 3 per loop, in frame_a; default zeros
    "loop_offsets_b": [],         # 3 per loop, in frame_b; default zeros
    "loop_axes": [],              # 3 per loop: the revolute loop's free axis in frame_a; default z
    "loop_baumgarte_kp": [],      # Baumgarte Kp per loop; default 0.0
    "loop_baumgarte_kd": [],      # Baumgarte Kd per loop; default 0.0
    "mimic": False,               # couple the URDF's mimic joints to their parents (their DoFs leave the state)
    # the output (docs/ros.md, "The linearization record")
    "dt": 0.0,                    # s; > 0: the record also holds Ad, Bd and the predicted next state
    "record_omit": [],            # sections left out of the record (bandwidth), e.g. [Ad, Bd]
    "publish_point": False,       # the point as linearization/point/joint_state and /odom too
    "publish_a_b": True,          # A and B as linearization/A and /B too
}

#: Parameter name -> its ROS 2 type, as the rclpy transport declares it (statically typed, so that
#: an empty list reads back as a string or double array). ``floating_base`` left unset means
#: "auto" (the named robot's default) and reads back as the value in use.
PARAMETER_TYPES = {
    "robot_description": "string", "urdf_path": "string", "robot": "string",
    "robot_description_topic": "string", "floating_base": "bool", "gravity": "double_array",
    "max_rate": "double", "max_odom_age": "double", "odom_wait": "double", "quaternion_tolerance": "double",
    "time_reset_threshold": "double", "warn_period": "double", "ignore_unknown_joints": "bool",
    "allow_empty_velocity_effort": "bool", "joint_states_topic": "string", "odom_topic": "string",
    "base_frame": "string", "odom_frame": "string",
    "contact_frames": "string_array", "contact_kinds": "string_array", "contact_references": "string_array",
    "contact_offsets": "double_array", "contact_baumgarte_kp": "double_array",
    "contact_baumgarte_kd": "double_array", "contact_mode": "string", "contacts_default_active": "bool",
    "contacts_topic": "string", "contact_forces_topic": "string", "max_contacts_age": "double",
    "dt": "double", "record_omit": "string_array", "publish_point": "bool", "publish_a_b": "bool",
    "loop_frames_a": "string_array", "loop_frames_b": "string_array", "loop_kinds": "string_array",
    "loop_references": "string_array", "loop_offsets_a": "double_array", "loop_offsets_b": "double_array",
    "loop_axes": "double_array", "loop_baumgarte_kp": "double_array", "loop_baumgarte_kd": "double_array",
    "mimic": "bool",
}


#: One line per parameter: what ``ros2 param describe`` shows (docs/ros.md, "Parameters", says more).
PARAMETER_DESCRIPTIONS = {
    "robot_description": "URDF XML of the robot (first model source)",
    "urdf_path": "path to a URDF file (second model source)",
    "robot": "a robot known to sva_linearizer.robots, e.g. quadruped, solo12, ur5 (third model source)",
    "robot_description_topic": "topic of the URDF (std_msgs/String, transient local) when no model parameter is set",
    "floating_base": ("true: the base moves on SE(3), its pose and twist from odom; false: fixed base; unset: the "
                      "named robot's default, else fixed when the URDF's root link is 'world'"),
    "gravity": "gravity in the world frame, m/s^2",
    "max_rate": "Hz by input stamp; 0: every joint state the node gets to",
    "max_odom_age": "s, largest |joint state stamp - odometry stamp|",
    "odom_wait": ("s a joint state waits for the odometry of its own stamp (then: the nearest within "
                  "max_odom_age); 0: no wait"),
    "quaternion_tolerance": "largest |norm - 1| of an odometry quaternion accepted (then normalised)",
    "time_reset_threshold": "s; a larger step back in stamps is a clock reset",
    "warn_period": "s between two warnings of one kind; 0: no throttling",
    "ignore_unknown_joints": "true: joint names the model lacks are ignored instead of rejected",
    "allow_empty_velocity_effort": "empty JointState velocity / effort are zero; false: such messages are dropped",
    "joint_states_topic": "the joint states (sensor_msgs/JointState)",
    "odom_topic": "the base odometry (nav_msgs/Odometry), floating base only",
    "base_frame": "odometry's child_frame_id must be this; empty: the URDF's root link",
    "odom_frame": "odometry's header.frame_id must be this; empty: any",
    "contact_frames": "contact frames (URDF links); empty: no contacts",
    "contact_kinds": "point or 6d per contact (one entry: all; none: point)",
    "contact_references": "local or world_aligned per contact (one entry: all; none: local)",
    "contact_offsets": "3 per contact, flat, in the link frame (one triple: all; none: zeros)",
    "contact_baumgarte_kp": "Baumgarte Kp per contact (one entry: all; none: 0)",
    "contact_baumgarte_kd": "Baumgarte Kd per contact (one entry: all; none: 0)",
    "contact_mode": "rigid: contacts are constraints (KKT); forces: their forces are inputs",
    "contacts_default_active": "before the first contact set: every configured contact is active",
    "contacts_topic": "the active contact set (sensor_msgs/JointState)",
    "contact_forces_topic": "contact forces as inputs (geometry_msgs/WrenchStamped per contact), contact_mode forces",
    "max_contacts_age": "s, largest |joint state stamp - contact set (or force) stamp|",
    "dt": "s; > 0: the record also holds Ad, Bd and the predicted next state",
    "record_omit": "sections left out of the linearization record",
    "publish_point": "also publish the point as linearization/point/joint_state and /odom",
    "publish_a_b": "also publish A and B alone on linearization/A and /B",
    "loop_frames_a": "the first frame of each closed loop (always active)",
    "loop_frames_b": "the second frame of each closed loop",
    "loop_kinds": "point, revolute or 6d per loop (one entry: all; none: point)",
    "loop_references": "local or world_aligned per loop (one entry: all; none: local)",
    "loop_offsets_a": "3 per loop, the point in frame_a (one triple: all; none: zeros)",
    "loop_offsets_b": "3 per loop, the point in frame_b (one triple: all; none: zeros)",
    "loop_axes": "3 per loop, a revolute loop's free axis in frame_a (one triple: all; none: z)",
    "loop_baumgarte_kp": "Baumgarte Kp per loop (one entry: all; none: 0)",
    "loop_baumgarte_kd": "Baumgarte Kd per loop (one entry: all; none: 0)",
    "mimic": "couple the URDF's mimic joints to their parents: the state's joints are the independent ones",
}

#: The ranges of the numeric parameters (from, to), as their descriptors declare them.
PARAMETER_RANGES = {"max_rate": (0.0, 1.0e6), "max_odom_age": (0.0, 3600.0), "odom_wait": (0.0, 1.0),
                    "quaternion_tolerance": (0.0, 1.0),
                    "time_reset_threshold": (0.0, 3600.0), "warn_period": (0.0, 3600.0),
                    "max_contacts_age": (0.0, 3600.0), "dt": (0.0, 10.0)}


def _as_bool(v, name):
    """A boolean parameter (also "true"/"false" strings and 0/1); ValueError naming it."""
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
        return v.strip().lower() in ("true", "1", "yes", "on")
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    raise ValueError(f"parameter {name}: expected true or false, got {v!r}")


def _as_float(v, name):
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"parameter {name}: expected a number, got {v!r}") from None
    lo, hi = PARAMETER_RANGES.get(name, (0.0, math.inf))
    if not math.isfinite(f) or not lo <= f <= hi:
        raise ValueError(f"parameter {name}: expected a number from {lo:g} to {hi:g}, got {v!r}")
    return f


def _as_list(v, name, kind):
    """A parameter array (list, tuple, array.array; None or an empty byte array: empty) of str or
    float; a lone scalar is a one-element list."""
    if v is None:
        return []
    if isinstance(v, (str, int, float)) and not isinstance(v, bool):
        v = [v]
    try:
        items = list(v)
    except TypeError:
        raise ValueError(f"parameter {name}: expected a list, got {v!r}") from None
    if kind is str:
        if not all(isinstance(x, str) for x in items):
            raise ValueError(f"parameter {name}: expected a list of strings, got {v!r}")
        return items
    try:
        out = [float(x) for x in items if not isinstance(x, (bool, str))]
    except (TypeError, ValueError):
        out = []
    if len(out) != len(items) or not all(math.isfinite(x) for x in out):
        raise ValueError(f"parameter {name}: expected a list of finite numbers, got {v!r}")
    return out


def _per_contact(values, n, name, default, width=1, of="contact_frames"):
    """A per-contact array: none (default), one entry (for all), or one per contact frame."""
    k = len(values) // width if len(values) % width == 0 else -1
    if k == 0:
        return [default] * n
    if k == 1:
        return [values if width > 1 else values[0]] * n
    if k == n:
        return [values[i * width:(i + 1) * width] if width > 1 else values[i] for i in range(n)]
    what = f"{len(values)} values ({width} per contact)" if width > 1 else f"{len(values)} values"
    raise ValueError(f"parameter {name}: {what} for {n} {of} (give one per entry, one for all, "
                     f"or none for the default)")


def contact_specs(p: dict) -> list:
    """The configured contacts as sl.Contact objects (in contact_frames order), from normalized
    parameters; raises ValueError naming the bad parameter. Frames are checked against the model
    when it is built."""
    frames = p["contact_frames"]
    n = len(frames)
    kinds = _per_contact(p["contact_kinds"], n, "contact_kinds", "point")
    refs = _per_contact(p["contact_references"], n, "contact_references", "local")
    offsets = _per_contact(p["contact_offsets"], n, "contact_offsets", [0.0, 0.0, 0.0], width=3)
    gains_kp = _per_contact(p["contact_baumgarte_kp"], n, "contact_baumgarte_kp", 0.0)
    gains_kd = _per_contact(p["contact_baumgarte_kd"], n, "contact_baumgarte_kd", 0.0)
    seen = set()
    for f in frames:
        if not f or any(c.isspace() or c == "," for c in f):
            raise ValueError(f"parameter contact_frames: {f!r} is not a frame name (empty, or has a "
                             f"space or a comma)")
        if f in seen:
            raise ValueError(f"parameter contact_frames: '{f}' is listed twice")
        seen.add(f)
    for name, values, allowed in (("contact_kinds", kinds, ("point", "6d")),
                                  ("contact_references", refs, ("local", "world_aligned"))):
        for f, v in zip(frames, values):
            if v not in allowed:
                raise ValueError(f"parameter {name}: '{v}' for contact '{f}' (expected "
                                 f"{' or '.join(allowed)})")
    return [sl.Contact(f, kind=k, reference=r, offset=o, baumgarte=(kp, kd))
            for f, k, r, o, kp, kd in zip(frames, kinds, refs, offsets, gains_kp, gains_kd)]


def loop_specs(p: dict) -> list:
    """The configured closed loops as sl.Loop objects (in loop_frames_a order), from normalized
    parameters; raises ValueError naming the bad parameter. Frames are checked against the model."""
    a, b = p["loop_frames_a"], p["loop_frames_b"]
    if len(a) != len(b):
        raise ValueError(f"parameter loop_frames_b: {len(b)} frames for {len(a)} loop_frames_a (one each)")
    n = len(a)
    kinds = _per_contact(p["loop_kinds"], n, "loop_kinds", "point", of="loop_frames_a")
    refs = _per_contact(p["loop_references"], n, "loop_references", "local", of="loop_frames_a")
    off_a = _per_contact(p["loop_offsets_a"], n, "loop_offsets_a", [0.0, 0.0, 0.0], width=3, of="loop_frames_a")
    off_b = _per_contact(p["loop_offsets_b"], n, "loop_offsets_b", [0.0, 0.0, 0.0], width=3, of="loop_frames_a")
    axes = _per_contact(p["loop_axes"], n, "loop_axes", [0.0, 0.0, 1.0], width=3, of="loop_frames_a")
    kp = _per_contact(p["loop_baumgarte_kp"], n, "loop_baumgarte_kp", 0.0, of="loop_frames_a")
    kd = _per_contact(p["loop_baumgarte_kd"], n, "loop_baumgarte_kd", 0.0, of="loop_frames_a")
    loops = []
    for i in range(n):
        try:
            loops.append(sl.Loop(a[i], b[i], kind=kinds[i], offset_a=off_a[i], offset_b=off_b[i], axis=axes[i],
                                 reference=refs[i], baumgarte=(kp[i], kd[i])))
        except ValueError as e:
            raise ValueError(f"parameters loop_*: loop {i + 1} ({a[i]!r}, {b[i]!r}): {e}") from None
    return loops


_TYPE_NAMES = {"string": "a string", "bool": "true or false", "double": "a number",
               "string_array": "a list of strings", "double_array": "a list of numbers"}


def typed_parameter_value(name: str, value, kind: str | None = None):
    """A parameter value in its declared ROS 2 type (``PARAMETER_TYPES``): integers become doubles
    (``-p max_rate:=100``), tuples and arrays lists; None stays None (unset). ``floating_base``
    "auto" is unset. Raises ValueError naming the parameter and the type it needs."""
    kind = kind or PARAMETER_TYPES[name]
    if value is None or (name == "floating_base" and value == "auto"):
        return None
    ok = None
    if kind == "string" and isinstance(value, str):
        ok = value
    elif kind == "bool" and isinstance(value, bool):
        ok = value
    elif kind == "double" and isinstance(value, (int, float)) and not isinstance(value, bool):
        ok = float(value)
    elif kind.endswith("_array") and not isinstance(value, (str, bytes, dict)):
        try:
            items = list(value)
        except TypeError:
            items = None
        if items is not None and kind == "string_array" and all(isinstance(x, str) for x in items):
            ok = items
        elif items is not None and kind == "double_array" and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in items):
            ok = [float(x) for x in items]
    if ok is None:
        raise ValueError(f"parameter {name}: expected {_TYPE_NAMES[kind]} ({kind.replace('_', ' ')}), "
                         f"got {value!r}")
    return ok


def _ros_builtin(name):
    """Parameters every ROS 2 node has (launch files set them); not the node's own."""
    return name in ("use_sim_time", "start_type_description_service") or name.startswith("qos_overrides.")


def normalize_parameters(params: dict) -> dict:
    """Defaults filled in, types coerced and checked; raises ValueError naming a bad parameter.
    ROS 2's built-in parameters (use_sim_time, qos_overrides.*) are accepted and left out."""
    params = {k: v for k, v in params.items() if not _ros_builtin(k)}
    unknown = sorted(set(params) - set(DEFAULT_PARAMETERS))
    if unknown:
        raise ValueError(f"unknown parameter(s): {', '.join(unknown)} (known: {', '.join(DEFAULT_PARAMETERS)})")
    p = dict(DEFAULT_PARAMETERS)
    p.update({k: v for k, v in params.items() if v is not None})
    for k in ("robot_description", "urdf_path", "robot", "robot_description_topic",
              "joint_states_topic", "odom_topic", "contacts_topic", "contact_forces_topic", "contact_mode",
              "base_frame", "odom_frame"):
        if not isinstance(p[k], str):
            raise ValueError(f"parameter {k}: expected a string, got {p[k]!r}")
    if p["floating_base"] == "auto":   # None: the URDF decides (sva_linearizer.urdf.floating_by_default)
        p["floating_base"] = None
        if p["robot"] and not (p["robot_description"] or p["urdf_path"]):
            from sva_linearizer.robots import default_floating_base
            try:
                p["floating_base"] = default_floating_base(p["robot"])
            except ValueError:
                pass  # unknown name: reported when the model is built
    if p["floating_base"] is not None:
        p["floating_base"] = _as_bool(p["floating_base"], "floating_base")
    for k in ("ignore_unknown_joints", "allow_empty_velocity_effort", "contacts_default_active",
              "publish_point", "publish_a_b", "mimic"):
        p[k] = _as_bool(p[k], k)
    for k in ("max_rate", "max_odom_age", "odom_wait", "quaternion_tolerance", "time_reset_threshold", "warn_period",
              "max_contacts_age", "dt"):
        p[k] = _as_float(p[k], k)
    for k in ("contact_frames", "contact_kinds", "contact_references", "record_omit", "loop_frames_a",
              "loop_frames_b", "loop_kinds", "loop_references"):
        p[k] = _as_list(p[k], k, str)
    for k in ("loop_offsets_a", "loop_offsets_b", "loop_axes", "loop_baumgarte_kp", "loop_baumgarte_kd"):
        p[k] = _as_list(p[k], k, float)
    unknown = [x for x in p["record_omit"] if x not in SECTIONS]
    if unknown:
        raise ValueError(f"parameter record_omit: unknown section(s) {', '.join(unknown)} (the record's "
                         f"sections: {', '.join(SECTIONS)})")
    for k in ("contact_offsets", "contact_baumgarte_kp", "contact_baumgarte_kd"):
        p[k] = _as_list(p[k], k, float)
    if p["contact_mode"] not in ("rigid", "forces"):
        raise ValueError(f"parameter contact_mode: expected rigid or forces, got {p['contact_mode']!r}")
    contact_specs(p)
    loop_specs(p)
    if p["mimic"] and (p["contact_frames"] or p["loop_frames_a"]):
        raise ValueError("parameter mimic: a model with coupled mimic joints takes no contacts or loops "
                         "(contact_frames, loop_frames_a must be empty)")
    try:
        gravity = [float(x) for x in p["gravity"]]
    except (TypeError, ValueError):
        gravity = None
    if gravity is None or len(gravity) != 3 or not all(math.isfinite(x) for x in gravity):
        raise ValueError(f"parameter gravity: expected 3 finite numbers, got {p['gravity']!r}")
    p["gravity"] = gravity
    return p
