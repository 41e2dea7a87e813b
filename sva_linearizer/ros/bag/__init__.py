# SPDX-License-Identifier: BSD-3-Clause
"""``sva-linearizer bag``: a rosbag2 recording linearized as the node would, into a rosbag2 of the
node's records (imports wire/ and node/: the node's input side and its record computation):

    recording.py   the input recording: opening it with rosbags, the node's topics, decoding
    chunk.py       one chunk (a log-time range): the node's input side fed in logged order, records in batches
    output.py      the output rosbag2 (MCAP or sqlite3), written under a temporary name, renamed when whole
    run.py         the coordinator: chunks in this process, in worker processes or on Dask; the summary
    progress.py    the progress bar on a terminal
"""
