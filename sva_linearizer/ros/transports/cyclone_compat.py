# SPDX-License-Identifier: BSD-3-Clause
"""What Cyclone DDS needs to talk to a ROS 2 system on Fast DDS: one configuration element that the
DDS transport always puts first (:data:`CYCLONE_COMPATIBILITY`), and the transport's default
configuration built from it (:func:`default_cyclone_config`).

docs/ros.md ("Transports") explains both settings and what they cost.
"""
from __future__ import annotations

import os

#: ``IgnoreTypeInformation`` 1.15: Cyclone ignores the XTypes type information that eProsima's
#: Fast DDS (RTPS vendor id 1.15) announces. Cyclone rejects Fast DDS's type objects for every
#: type with a sequence (JointState, Odometry, Float64MultiArray: "ddsi_xt_type_add_typeobj with
#: invalid type object") and then matches none of them; with this element, endpoints of that
#: vendor match by type name (as ROS 2's rmw layer does) and the CDR bytes are the same. Only
#: 1.15 is listed, so Cyclone-Cyclone (1.16) matching keeps its full type check. The cost: a
#: same-named but different type from that vendor matches, and its samples fail to decode (the
#: transport drops them with a warning).
#: ``GenerateKeyhash``: Fast DDS only acts on a discovery "dispose" (an endpoint or participant
#: leaving) that carries a key hash, which Cyclone leaves out by default; without it a Fast DDS
#: peer keeps a deleted Cyclone node's endpoints for the rest of the lease (10 s). ROS 2 topics
#: have no keys, so user data is unchanged.
CYCLONE_COMPATIBILITY = ("<Compatibility><IgnoreTypeInformation>1.15</IgnoreTypeInformation>"
                         "</Compatibility><Internal><GenerateKeyhash>true</GenerateKeyhash></Internal>")


def default_cyclone_config(environ=None) -> str:
    """The DDS transport's configuration when none is given: the Fast DDS compatibility element,
    then ``CYCLONEDDS_URI`` (a user's settings come later and win where they overlap)."""
    env = os.environ if environ is None else environ
    base = f'<CycloneDDS><Domain Id="any">{CYCLONE_COMPATIBILITY}</Domain></CycloneDDS>'
    user = env.get("CYCLONEDDS_URI", "").strip()
    return f"{base},{user}" if user else base
