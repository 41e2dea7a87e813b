# SPDX-License-Identifier: BSD-3-Clause
"""Tools beside the package's layers, using it from outside: bench, profile, the compile report,
the outputs check, the figures of `sva-linearizer plot`."""
