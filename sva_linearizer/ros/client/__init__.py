# SPDX-License-Identifier: BSD-3-Clause
"""A consumer's side of the node, on any transport of the package (imports wire/ and node/):

    record_reader.py   RecordReader: the description and the records, decoded into Record objects
    horizon_client.py  HorizonClient: a planner's horizon requests and their answers, matched by id
"""
