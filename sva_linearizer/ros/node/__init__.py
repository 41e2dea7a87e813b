# SPDX-License-Identifier: BSD-3-Clause
"""The node, written once for every transport, with its record, its horizon answers and its parameters
(imports wire/):

    node.py             LinearizerNode: model, inputs, linearization, publishing, diagnostics
    inputs.py           the input side without a transport: message checks, pairing by stamp, drops by reason
    compute.py          the records of paired states through one horizon call (the node's and the bag's)
    record.py           the linearization record: its layout, encoding, decoding, description
    horizon.py          a planner's horizon request and the node's answer: the wire format
    horizon_service.py  the node's answers to horizon requests, on a worker thread of their own
    parameters.py       the parameters: names, defaults, ROS 2 types, checks, the configured contacts
    parameter_files.py  parameter files and ``--ros-args`` for the DDS transport
    launch_config.py    what ``launch/linearizer.launch.py`` starts, decided without ``launch``
    log.py              stderr log lines for the DDS transport; throttled warnings
"""
