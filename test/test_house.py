# SPDX-License-Identifier: BSD-3-Clause
"""The repository's own rules that a ROS 2 package's linters check: every source file names its
license (ament_copyright's rule, as an SPDX line matching package.xml's and LICENSE's), and the
package's license is the same in package.xml, setup.py and LICENSE."""
import re
import subprocess

from checkout import ROOT

SPDX = "SPDX-License-Identifier: BSD-3-Clause"


def _sources():
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard",
                          "*.py", "*.cpp"], capture_output=True, text=True, check=True).stdout
    return [ROOT / n for n in out.split() if (ROOT / n).is_file()]


def test_every_source_file_names_its_license():
    files = _sources()
    assert len(files) > 50
    missing = [str(f.relative_to(ROOT)) for f in files if SPDX not in f.read_text(encoding="utf-8")[:2000]]
    assert not missing, f"no '{SPDX}' line in: {', '.join(missing)}"


def test_one_license_everywhere():
    assert "<license>BSD-3-Clause</license>" in (ROOT / "package.xml").read_text()
    assert re.search(r'license="BSD-3-Clause"', (ROOT / "setup.py").read_text())
    assert (ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License")


def test_package_xml_declares_what_the_node_imports():
    """rosdep installs what package.xml names: every ROS 2 message package the rclpy transport
    imports, rclpy itself, and example-robot-data (the shipped configs but quadruped name its robots)."""
    from sva_linearizer.ros.transports.prerequisites import RCLPY_MESSAGE_PACKAGES

    declared = set(re.findall(r"<exec_depend>([\w\-]+)</exec_depend>", (ROOT / "package.xml").read_text()))
    missing = (set(RCLPY_MESSAGE_PACKAGES) | {"rclpy", "example-robot-data", "urdfdom_py"}) - declared
    assert not missing, f"package.xml does not declare: {', '.join(sorted(missing))}"
