# SPDX-License-Identifier: BSD-3-Clause
"""launch_testing test (machines with ROS 2 only): start launch/linearizer.launch.py with a robot
config, publish joint states with rclpy, and check that A, B and the pair record arrive.

Needs the package built and sourced (colcon build; source install/setup.bash), then
`colcon test --packages-select sva_linearizer` or `launch_test test/test_ros_launch.py`; under plain
pytest, launch_testing's plugin collects it. Skipped, with the reason, where launch_testing,
launch_ros or rclpy is not installed, or where sva_linearizer is not in an ament index with its
linearizer_node executable (e.g. a `pip install -e` environment).
"""
import os
import pathlib
import time
import unittest

import pytest

pytest.importorskip("launch_testing", reason="launch_testing (ROS 2) is not installed")
pytest.importorskip("launch_ros", reason="launch_ros (ROS 2) is not installed")
rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2) is not installed")
_ament = pytest.importorskip("ament_index_python.packages", reason="ament_index_python (ROS 2) is not installed")
try:
    _prefix = _ament.get_package_prefix("sva_linearizer")
except (_ament.PackageNotFoundError, OSError):   # OSError: AMENT_PREFIX_PATH unset or empty
    pytest.skip("sva_linearizer is not in an ament index (AMENT_PREFIX_PATH): colcon build and source "
                "install/setup.bash to run the launch test", allow_module_level=True)
if not os.access(os.path.join(_prefix, "lib", "sva_linearizer", "linearizer_node"), os.X_OK):
    pytest.skip(f"the ament index's sva_linearizer ({_prefix}) has no lib/sva_linearizer/linearizer_node",
                allow_module_level=True)

import launch  # noqa: E402
import launch.actions  # noqa: E402
import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
UR5_JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
              "wrist_3_joint"]


@pytest.mark.launch_test
def generate_test_description():
    return launch.LaunchDescription([
        launch.actions.IncludeLaunchDescription(
            PythonLaunchDescriptionSource(str(ROOT / "launch" / "linearizer.launch.py")),
            launch_arguments={"config": str(ROOT / "config" / "ur5.yaml"),
                              "namespace": "launch_test"}.items()),
        launch_testing.actions.ReadyToTest(),
    ])


class TestLinearizerLaunch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        rclpy.init()
        cls.node = rclpy.create_node("sva_linearizer_launch_test", namespace="launch_test")

    @classmethod
    def tearDownClass(cls):
        cls.node.destroy_node()
        rclpy.shutdown()

    def test_A_and_B_arrive(self):
        got = {"A": [], "B": [], "record": []}
        node = self.node
        node.create_subscription(Float64MultiArray, "linearization/A", got["A"].append, 10)
        node.create_subscription(Float64MultiArray, "linearization/B", got["B"].append, 10)
        node.create_subscription(Float64MultiArray, "linearization/record", got["record"].append, 10)
        pub = node.create_publisher(JointState, "joint_states", 10)
        end = time.monotonic() + 60.0
        while time.monotonic() < end and not all(got.values()):
            msg = JointState()
            msg.header.stamp = node.get_clock().now().to_msg()
            msg.name = list(reversed(UR5_JOINTS))
            msg.position = [0.1, -0.2, 0.3, -0.4, 0.5, -0.6]
            msg.velocity = [0.0] * 6
            msg.effort = [1.0] * 6
            pub.publish(msg)
            rclpy.spin_once(node, timeout_sec=0.1)
        self.assertTrue(all(got.values()), f"received: { {k: len(v) for k, v in got.items()} }")
        A, B = got["A"][0], got["B"][0]
        self.assertEqual([(d.label, d.size, d.stride) for d in A.layout.dim], [("rows", 12, 144), ("cols", 12, 12)])
        self.assertEqual([(d.label, d.size, d.stride) for d in B.layout.dim], [("rows", 12, 72), ("cols", 6, 6)])
        self.assertEqual(len(A.data), 144)
        self.assertEqual(got["record"][0].data[0], 1.0)      # the record's format


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_exit_code(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2, -15])
