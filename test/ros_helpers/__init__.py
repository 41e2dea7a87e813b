# SPDX-License-Identifier: BSD-3-Clause
"""Helpers of the ROS 2 tests: the in-memory transport, the real-DDS harness, shared checks, the oracle."""
