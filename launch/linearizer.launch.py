"""Launch the sva_linearizer node with a robot configuration.

    ros2 launch sva_linearizer linearizer.launch.py robot:=solo12
    ros2 launch sva_linearizer linearizer.launch.py config:=/path/to/my_robot.yaml namespace:=robot1

Arguments:
    robot      name of a config shipped in the package's config/ directory (solo12, anymal_c, ur5,
               panda, quadruped, g1_29dof, talos); default solo12
    config     a ROS 2 parameter file; default <share>/sva_linearizer/config/<robot>.yaml
    namespace  node namespace (its topics joint_states, odom, linearization/* are relative)
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    robot = LaunchConfiguration("robot")
    config = LaunchConfiguration("config")
    namespace = LaunchConfiguration("namespace")
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="solo12",
                              description="robot config name: config/<robot>.yaml of this package"),
        DeclareLaunchArgument(
            "config",
            default_value=PathJoinSubstitution([FindPackageShare("sva_linearizer"), "config",
                                                [robot, ".yaml"]]),
            description="ROS 2 parameter file for the node (overrides robot)"),
        DeclareLaunchArgument("namespace", default_value="", description="node namespace"),
        Node(
            package="sva_linearizer",
            executable="linearizer_node",
            name="sva_linearizer",
            namespace=namespace,
            parameters=[config],
            output="screen",
            emulate_tty=True,
        ),
    ])
