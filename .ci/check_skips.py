"""Fail when a test of a pytest JUnit XML report skipped for a reason other than a missing launch,
launch_ros or launch_testing (not on PyPI): the ROS 2 tests of a CI environment with rclpy wheels
must run, not skip. Prints the counts.

    python .ci/check_skips.py REPORT.xml
"""
import re
import sys
import xml.etree.ElementTree as ET

ALLOWED = re.compile(r"\b(launch|launch_ros|launch_testing) \(ROS 2\) is not installed")


def main(path):
    cases = list(ET.parse(path).getroot().iter("testcase"))
    skipped = [(c, s) for c in cases for s in c.findall("skipped")]
    reason = lambda s: f"{s.get('message', '')} {s.text or ''}"   # noqa: E731 - a module's skip: in the text
    bad = [(c, s) for c, s in skipped if not ALLOWED.search(reason(s))]
    failed = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
    print(f"{path}: {len(cases)} tests, {len(cases) - len(skipped) - len(failed)} passed, "
          f"{len(failed)} failed or errors, {len(skipped)} skipped ({len(skipped) - len(bad)} for launch)")
    for c, s in bad:
        print(f"  skipped, not allowed: {c.get('classname')}::{c.get('name')}: {reason(s)}")
    if not cases:
        return "no tests ran"
    return 1 if bad or failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
