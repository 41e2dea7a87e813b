# SPDX-License-Identifier: BSD-3-Clause
"""The processes around the node in ``sva-linearizer demo`` and ``bench-node`` (imports every other
part but cli.py):

    sim.py      a simulated robot that publishes joint_states and odom (and contacts, commands)
    plant.py    simulated robots to close loops around: Pinocchio's dynamics, or the package's own
    control.py  a controller on the node's records alone (the closed-loop demo)
    mpc.py      a model-predictive controller on the node's horizon (one Riccati step per period)
    tasks.py    the horizon demo's tasks: an arm's fast reference, a quadruped lifting a foot
    demo.py     the demo: simulator, node and an echo (or the controller) as processes on loopback DDS
    horizon_demo.py  the demo with the MPC: its loop through the horizon topics, its verdicts
    bench.py    the node's sustained output rate and latency over loopback DDS or ROS 2
"""
