# SPDX-License-Identifier: BSD-3-Clause
"""The node's start-up errors: one line that names what is missing and how to install it, exit
code 2, and no switch to the other transport.

A missing Python package is simulated by a shadow package placed first on PYTHONPATH whose import
fails as an absent module's does (ModuleNotFoundError), so the real one stays installed for the
rest of the suite. The node runs as its own process (`python -m sva_linearizer.ros node`), on a
private loopback-only domain where it gets as far as creating a participant."""
import os
import pathlib
import subprocess
import sys

import pytest

from sva_linearizer.ros.transports.loopback import loopback_env, private_domain_id

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _have(module):
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def _shadow(tmp_path, *modules):
    d = tmp_path / "shadow"
    for m in modules:
        (d / m).mkdir(parents=True)
        (d / m / "__init__.py").write_text(f"raise ModuleNotFoundError(\"No module named '{m}'\", name='{m}')\n")
    return d


def _node(tmp_path, args, hide=(), env=None, timeout=120):
    """(exit code, non-empty stderr lines, stdout) of the node run with `hide` made unimportable."""
    env = dict(env or loopback_env(private_domain_id(os.getpid() + 4099)))
    paths = ([str(_shadow(tmp_path, *hide))] if hide else []) + [str(ROOT), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env.pop("ROS_DISTRO", None)
    r = subprocess.run([sys.executable, "-m", "sva_linearizer.ros", "node", *args], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=timeout)
    return r.returncode, [ln for ln in r.stderr.splitlines() if ln.strip()], r.stdout


def test_message_packages_missing_under_rclpy_is_an_error_not_a_switch_to_dds(tmp_path):
    if not _have("rclpy"):
        pytest.skip("needs ROS 2's rclpy (pip install '.[ros]')")
    rc, err, out = _node(tmp_path, ["--robot", "ur5"], hide=("sensor_msgs", "nav_msgs"))
    assert rc == 2 and len(err) == 1, err
    line = err[0]
    assert "message package(s) sensor_msgs, nav_msgs do not" in line
    assert "rosdep keys sensor_msgs, nav_msgs" in line and "ros-<distro>-sensor-msgs ros-<distro>-nav-msgs" in line
    assert "--transport dds" in line and "cyclonedds" not in line and "transport dds;" not in out


def test_no_transport_at_all(tmp_path):
    rc, err, _ = _node(tmp_path, ["--robot", "ur5"], hide=("rclpy", "cyclonedds"))
    assert rc == 2 and len(err) == 1, err
    assert "no transport: rclpy (ROS 2) does not import" in err[0] and "pip install 'sva_linearizer[dds]'" in err[0]
    assert "rosdep key rclpy" in err[0]


def test_dds_transport_without_cyclonedds(tmp_path):
    rc, err, _ = _node(tmp_path, ["--robot", "ur5", "--transport", "dds"], hide=("cyclonedds",))
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("sva-linearizer node: the DDS transport needs the cyclonedds package")
    assert "pip install 'sva_linearizer[dds]'" in err[0]


def test_rclpy_transport_without_rclpy(tmp_path):
    rc, err, _ = _node(tmp_path, ["--robot", "ur5", "--transport", "rclpy"], hide=("rclpy",))
    assert rc == 2 and len(err) == 1, err
    assert "transport rclpy: rclpy (ROS 2) does not import" in err[0] and "source your ROS 2 setup" in err[0]


@pytest.mark.parametrize("transport", ["dds", "rclpy"])
def test_a_model_that_cannot_load_stops_the_node(tmp_path, transport):
    module = "cyclonedds" if transport == "dds" else "rclpy"
    if not _have(module):
        pytest.skip(f"the {transport} transport needs {module}, which is not installed")
    missing = tmp_path / "no_such_robot.urdf"
    rc, err, _ = _node(tmp_path, ["--urdf", str(missing), "--transport", transport])
    assert rc == 2, err
    lines = [ln for ln in err if "cannot build a model" in ln]
    assert len(lines) == 1 and "no_such_robot" in lines[0], err     # (a long path is shortened in the middle)
    assert not any("Traceback" in ln for ln in err), err


def test_robot_without_example_robot_data_says_how_to_install_it(monkeypatch):
    if not _have("cyclonedds"):
        pytest.skip("the in-memory transport's message classes come from cyclonedds, which is not installed")
    from ros_helpers.fake_transport import FakeTransport

    import sva_linearizer.robots as robots
    from sva_linearizer.ros.node.node import LinearizerNode, ModelLoadError

    monkeypatch.delenv("EXAMPLE_ROBOT_DATA_DIR", raising=False)
    monkeypatch.setenv("ROS_DISTRO", "jazzy")
    monkeypatch.setattr(robots, "_candidate_dirs", lambda: iter(()))
    with pytest.raises(ModelLoadError) as e:
        LinearizerNode(FakeTransport(), {"robot": "solo12"})
    text = str(e.value)
    assert "example-robot-data was not found: `pip install example-robot-data`" in text
    assert "rosdep key example-robot-data (sudo apt install ros-jazzy-example-robot-data)" in text
