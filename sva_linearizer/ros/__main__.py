# SPDX-License-Identifier: BSD-3-Clause
"""``python -m sva_linearizer.ros {node,demo,bench-node,sim} ...``"""
import sys

from .cli import main

sys.exit(main())
