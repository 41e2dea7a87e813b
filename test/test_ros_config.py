# SPDX-License-Identifier: BSD-3-Clause
"""config/*.yaml (ROS 2 parameter files), launch/linearizer.launch.py, parameter parsing, CLI wiring."""
import argparse
import pathlib

import pytest

from sva_linearizer.robots import default_floating_base, load_robot
from sva_linearizer.ros import cli
from sva_linearizer.ros.node.parameter_files import load_params_file, parse_params_yaml, parse_ros_args
from sva_linearizer.ros.node.parameters import DEFAULT_PARAMETERS, contact_specs, normalize_parameters

ROOT = pathlib.Path(__file__).resolve().parents[1]
REQUIRED = ["solo12", "anymal_c", "ur5", "panda", "quadruped"]


def test_required_configs_exist():
    names = {p.stem for p in (ROOT / "config").glob("*.yaml")}
    assert set(REQUIRED) <= names


@pytest.mark.parametrize("path", sorted((ROOT / "config").glob("*.yaml")), ids=lambda p: p.stem)
def test_config_is_a_ros2_parameter_file_for_its_robot(path):
    import yaml

    data = yaml.safe_load(path.read_text())
    assert list(data) == ["/**"] and list(data["/**"]) == ["ros__parameters"]
    params = load_params_file(path)
    assert set(params) == set(DEFAULT_PARAMETERS)          # every parameter, documented in place
    p = normalize_parameters(params)
    assert p["robot"] == path.stem and p["floating_base"] == default_floating_base(path.stem)
    # rclpy needs one type per list: gravity must be all floats
    assert all(isinstance(g, float) for g in params["gravity"])
    assert isinstance(params["max_rate"], float) and isinstance(params["max_odom_age"], float)
    model = load_robot(path.stem, floating_base=p["floating_base"])
    assert model.nj > 0
    # contact arrays: rclpy needs one type per list (floats stay floats), frames exist in the model
    for k in ("contact_offsets", "contact_baumgarte_kp", "contact_baumgarte_kd"):
        assert all(isinstance(x, float) for x in params[k]), k
    contacts = contact_specs(p)
    assert all(c.frame in model.frame_names for c in contacts)


def test_legged_configs_have_their_feet():
    """solo12: four point feet; talos: two 6d soles; the demo stands solo12 and the quadruped on the
    feet of their configs (sim.STANDING_FEET)."""
    from sva_linearizer.ros.demo.sim import STANDING_FEET

    feet = {}
    for robot in ("solo12", "quadruped", "talos"):
        cs = contact_specs(normalize_parameters(load_params_file(ROOT / "config" / f"{robot}.yaml")))
        feet[robot] = [(c.frame, c.kind) for c in cs]
    assert feet["solo12"] == [(f, "point") for f in ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")]
    assert feet["talos"] == [("left_sole_link", "6d"), ("right_sole_link", "6d")]
    for robot in ("solo12", "quadruped"):
        assert [f for f, _ in feet[robot]] == STANDING_FEET[robot]


def test_params_file_matching_and_ros_args(tmp_path):
    text = ("/**:\n  ros__parameters:\n    robot: ur5\n    max_rate: 1.0\n"
            "sva_linearizer:\n  ros__parameters:\n    max_rate: 2.0\n"
            "other_node:\n  ros__parameters:\n    max_rate: 3.0\n")
    assert parse_params_yaml(text) == {"robot": "ur5", "max_rate": 2.0}
    f = tmp_path / "p.yaml"
    f.write_text(text)
    got = parse_ros_args(["--ros-args", "-r", "__node:=x", "--params-file", str(f), "-p", "gravity:=[0.0, 0.0, -1.0]",
                          "-p", "floating_base:=false"])
    assert got == {"robot": "ur5", "max_rate": 2.0, "gravity": [0.0, 0.0, -1.0], "floating_base": False}
    assert "use_sim_time" not in normalize_parameters({"use_sim_time": True, "qos_overrides./odom.depth": 5})
    with pytest.raises(ValueError, match="ros__parameters"):
        parse_params_yaml("sva_linearizer:\n  robot: ur5\n")


def test_launch_file_builds_with_ros2():
    pytest.importorskip("launch_ros", reason="launch_ros (ROS 2) is not installed")
    import importlib.util

    spec = importlib.util.spec_from_file_location("lf", ROOT / "launch" / "linearizer.launch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.generate_launch_description().entities


def test_subcommands_register_on_a_parser():
    parser = argparse.ArgumentParser(prog="sva-linearizer")
    sub = parser.add_subparsers(dest="command", required=True)
    cli.add_subcommands(sub)
    args = parser.parse_args(["node", "--robot", "solo12", "--fixed-base", "--transport", "dds",
                              "--param", "max_rate=100.0"])
    assert args.func is not None and args.robot == "solo12" and args.floating_base is False
    params, own = cli._collect_parameters(args, [])
    assert params == own == {"robot": "solo12", "urdf_path": "", "robot_description": "", "floating_base": False,
                             "max_rate": 100.0}
    # with rclpy, --config travels to rcl as a --params-file before the user's own --ros-args
    ur5 = str(pathlib.Path(__file__).resolve().parents[1] / "config" / "ur5.yaml")
    args = parser.parse_args(["node", "--config", ur5])
    assert cli._rcl_args(args, ["--ros-args", "-p", "max_rate:=5.0"]) == [
        "linearizer_node", "--ros-args", "--params-file", ur5, "-p", "max_rate:=5.0"]
    params, own = cli._collect_parameters(args, ["--ros-args", "-p", "max_rate:=5.0"])
    assert params["robot"] == "ur5" and params["max_rate"] == 5.0 and own == {}
    for cmd in (["demo"], ["bench-node", "--rates", "500"], ["node", "--config", "config/ur5.yaml"]):
        assert callable(parser.parse_args(cmd).func)
    with pytest.raises(SystemExit):
        parser.parse_args(["node", "--floating-base", "--fixed-base"])


def test_bad_parameter_is_reported_with_exit_code_2(capsys):
    assert cli.main(["node", "--transport", "dds", "--param", "max_odom_age=-1"]) == 2
    assert "max_odom_age" in capsys.readouterr().err


def test_dds_names_and_ros_domain_id(monkeypatch):
    pytest.importorskip("cyclonedds", reason="the DDS transport needs the cyclonedds package")
    from sva_linearizer.ros.transports.loopback import loopback_config, private_domain_id
    from sva_linearizer.ros.transports.transport_dds import DdsTransport, dds_topic_name

    assert dds_topic_name("joint_states") == "rt/joint_states"
    assert dds_topic_name("linearization/A", "/robot1") == "rt/robot1/linearization/A"
    assert dds_topic_name("/robot_description", "/robot1") == "rt/robot_description"
    domain = private_domain_id(4242)
    monkeypatch.setenv("ROS_DOMAIN_ID", str(domain))
    t = DdsTransport("domain_test", config=loopback_config())
    try:
        assert t.domain_id == domain
    finally:
        t.close()


def test_loopback_env_prints_the_shipped_profile_and_leaves_the_domain_alone(capsys):
    """`sva-linearizer loopback-env`: export lines a shell can eval, naming the package's Fast DDS
    profile (a file that is a well-formed profile whitelisting 127.0.0.1 only), the one profile
    Fast DDS then reads (SKIP_DEFAULT_XML_FILE=1); ROS_DOMAIN_ID only when given."""
    import shlex
    import xml.etree.ElementTree as ET

    from sva_linearizer.ros.transports.loopback import FASTDDS2_PROFILE, FASTDDS_PROFILE, fast_dds_2

    assert cli.main(["loopback-env"]) == 0
    out = capsys.readouterr().out
    env = dict(shlex.split(line[len("export "):])[0].split("=", 1) for line in out.splitlines())
    assert "ROS_DOMAIN_ID" not in env and env["SKIP_DEFAULT_XML_FILE"] == "1"
    name = "FASTRTPS_DEFAULT_PROFILES_FILE" if fast_dds_2() else "FASTDDS_DEFAULT_PROFILES_FILE"
    assert env[name] == (FASTDDS2_PROFILE if fast_dds_2() else FASTDDS_PROFILE)
    for path, heartbeat in ((FASTDDS_PROFILE, "heartbeat_period"), (FASTDDS2_PROFILE, "heartbeatPeriod")):
        root = ET.parse(path).getroot()
        ns = {"f": "http://www.eprosima.com"}
        assert [a.text for a in root.iterfind(".//f:interfaceWhiteList/f:address", ns)] == ["127.0.0.1"]
        assert root.find(f".//f:{heartbeat}", ns) is not None
    assert cli.main(["loopback-env", "--domain-id", "42"]) == 0
    assert "export ROS_DOMAIN_ID=42" in capsys.readouterr().out.splitlines()
