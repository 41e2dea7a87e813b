# SPDX-License-Identifier: BSD-3-Clause
"""sva_linearizer: ament_python package (colcon build) that also installs with pip."""
from glob import glob

from setuptools import find_packages, setup

package_name = "sva_linearizer"

setup(
    name=package_name,
    version="0.1.0",
    description="Exact, singularity-free linearization (A, B) of whole-body robot dynamics from a URDF",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="BSD-3-Clause",
    python_requires=">=3.10",
    packages=find_packages(exclude=["test", "test.*"]),
    package_data={package_name: ["data/*.urdf", "data/*.xml"]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", glob("launch/*.launch.py")),
        ("share/" + package_name + "/config", glob("config/*.yaml")),
    ],
    # Loose lower bounds: ROS 2 Humble ships numpy 1.21 and scipy 1.8 (Ubuntu 22.04)
    install_requires=["numpy>=1.21", "scipy>=1.8", "urdf_parser_py>=0.0.4", "lxml>=4.8", "PyYAML>=5.4"],
    extras_require={
        # compiled kernels (same functions, faster); 0.59 is the oldest whose compile is tested
        # (.ci/floors; Ubuntu 22.04's numba 0.55 is too old: pip install "numba>=0.59")
        "fast": ["numba>=0.59"],
        "dds": ["cyclonedds>=0.10.2"],                # ROS 2 wire protocol without a ROS 2 install
        "plot": ["matplotlib>=3.5"],                  # `sva-linearizer plot`
        "robots": ["example-robot-data>=4.1"],        # robots by name (--robot solo12, ur5, ...)
        "bag": ["rosbags>=0.11"],                     # `sva-linearizer bag`: reads and writes rosbag2 (MCAP, sqlite3)
        # `sva-linearizer bag --dask ADDRESS`: the chunks on a Dask distributed cluster
        "dask": ["rosbags>=0.11", "dask[distributed]>=2023.1"],
        # pytest < 9.1: pytest 9.1 refuses the pytest plugin of launch_testing up to Jazzy's 3.4.11,
        # Kilted's 3.8.8 and every Humble release (docs/ros.md, "The launch file and the parameters")
        "test": ["pytest>=7,<9.1", "pin>=3.0", "example-robot-data>=4.1", "rosbags>=0.9.15", "matplotlib>=3.5",
                 "dask[distributed]>=2023.1"],
        # tests only: ROS 2 community wheels (Python 3.11) as a real ROS 2 peer, and colcon; CI pins
        # Kilted's (requirements-ci.txt) and Jazzy's (requirements-ci-jazzy.txt); on a robot, rclpy
        # comes from the ROS 2 distribution instead
        # (the wheels exist for CPython 3.11 only: elsewhere the extra installs colcon alone and the
        # rclpy tests skip)
        "ros": [f"{w}; python_version == '3.11'" for w in (
            "ros-rclpy", "ros-std-msgs", "ros-sensor-msgs", "ros-nav-msgs", "ros-diagnostic-msgs",
            "ros-rmw-fastrtps-cpp")]
               + ["colcon-common-extensions"],
    },
    entry_points={
        "console_scripts": [
            "sva-linearizer = sva_linearizer.cli:main",
            "linearizer_node = sva_linearizer.ros.cli:main_node",
        ],
    },
    zip_safe=True,
)
