# SPDX-License-Identifier: BSD-3-Clause
"""Launch the sva_linearizer node with a robot configuration.

    ros2 launch sva_linearizer linearizer.launch.py robot:=solo12
    ros2 launch sva_linearizer linearizer.launch.py config:=/path/to/my_robot.yaml namespace:=robot1

Arguments:
    robot         name of a config shipped in the package's config/ directory (anymal_c, g1_29dof,
                  panda, quadruped, solo12, talos, ur5); default quadruped (bundled; the others
                  need example-robot-data)
    config        a ROS 2 parameter file for the node; when given, robot is not used
    namespace     node namespace (its topics joint_states, odom, linearization/* are relative)
    use_sim_time  true: the node's clock is /clock (simulation, bags); default false

A robot without a shipped config, or a config file that does not exist or does not check, stops
the launch with one error line that lists the shipped configs. The decisions are made by
sva_linearizer.ros.node.launch_config (tested without launch); this file uses only actions and
substitutions that launch / launch_ros of Humble, Jazzy and Kilted all have.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def _node(context):
    from sva_linearizer.ros.node.launch_config import resolve_launch

    plan = resolve_launch(robot=LaunchConfiguration("robot").perform(context),
                          config=LaunchConfiguration("config").perform(context),
                          namespace=LaunchConfiguration("namespace").perform(context),
                          use_sim_time=LaunchConfiguration("use_sim_time").perform(context))
    return [Node(**plan.node_arguments())]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="quadruped",
                              description="robot config name: config/<robot>.yaml of this package"),
        DeclareLaunchArgument("config", default_value="",
                              description="ROS 2 parameter file for the node (overrides robot)"),
        DeclareLaunchArgument("namespace", default_value="", description="node namespace"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="true: the node takes ROS time from /clock"),
        OpaqueFunction(function=_node),
    ])
