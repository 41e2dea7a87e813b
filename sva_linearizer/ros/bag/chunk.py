# SPDX-License-Identifier: BSD-3-Clause
"""One chunk of a recording: the messages logged in a time range, fed to the node's input side
(:class:`sva_linearizer.ros.node.inputs.NodeInputs`) in their logged order, and the records of the
joint states it hands on, computed in batches (:class:`sva_linearizer.ros.node.compute.RecordComputer`)
and serialized as ROS 2 messages. :func:`run_chunk` runs in the command's own process, in a worker
process of ``--workers``, or on a Dask worker: everything it needs is in its :class:`Job`.

The log time stands in for both of the node's clocks: a message's log time is its receive time
(the stamp of an unstamped message), and the steady clock of the odometry wait reads the log time
of the message being fed. A joint state that waits for the odometry of its own stamp goes on
without it when its ``odom_wait`` is over: before the first message logged after that time (as
the node's timer would release it then), and at the end of the recording. The outcome depends on
the recording alone.

A chunk owns the records of the joint states handed on from the moment its time range starts
(its pairing state then: ``start_state``) up to the moment it ends (``end_state``). It gets its
pairing state at the start either exactly (``seed``: the end state of the chunk before) or by
feeding the messages of a warm-up span before its range and dropping what they give; the
coordinator compares that start state with the previous chunk's end state and runs the chunk again
from the exact one when they differ (:mod:`.run`).
"""
from __future__ import annotations

import json
import os
import struct
import time
from dataclasses import dataclass, field

import numpy as np

import sva_linearizer

from ..node.compute import RecordComputer
from ..node.inputs import NodeInputs, Paired
from ..node.node import build_model
from ..node.parameters import contact_specs, loop_specs
from .recording import ROLES, BagError, decoder, open_reader

# a record as std_msgs/Float64MultiArray in CDR (little endian): the encapsulation header, one
# dimension ("record", n, n), data_offset 0, then n float64 from byte 36 (8-aligned)
_HEAD = struct.Struct("<4sII8sIIII")
HEAD_SIZE = _HEAD.size
#: where data[2], the record's seq, lies in its serialized message
SEQ_OFFSET = HEAD_SIZE + 16
_THREADS = "SVA_LINEARIZER_NUM_THREADS"
#: test hook: "CHUNK:MARKER[:exit]" makes the first try of chunk CHUNK fail (raise, or end the
#: worker's process with "exit"), leaving the file MARKER so that the retry goes through
FAULT_ENV = "SVA_LINEARIZER_BAG_TEST_FAULT"


def record_buffers(K: int, n: int) -> np.ndarray:
    """K records of n float64, as a (K, n) view of their serialized messages side by side in one
    buffer: each the CDR of the node's std_msgs/Float64MultiArray (record.record_msg) with its head
    written, 4 bytes apart so that the values are 8-aligned; the records are encoded straight into
    them (RecordComputer's ``alloc``), :func:`message_of` gives a row's message."""
    size = 4 + HEAD_SIZE + 8 * n
    raw = np.empty(K * size, dtype=np.uint8)
    rows = raw.reshape(K, size)
    rows[:, 4:4 + HEAD_SIZE] = np.frombuffer(_HEAD.pack(b"\x00\x01\x00\x00", 1, 7, b"record\x00\x00", n, n, 0, n),
                                             dtype=np.uint8)
    return np.ndarray((K, n), dtype="<f8", buffer=raw, offset=4 + HEAD_SIZE, strides=(size, 8))


def message_of(data: np.ndarray) -> np.ndarray:
    """The serialized message (its bytes, a uint8 array) of a record, a row of :func:`record_buffers`."""
    base = data.base
    while not isinstance(base, np.ndarray) or base.dtype != np.uint8 or base.ndim != 1:
        base = base.base
    start = data.__array_interface__["data"][0] - base.__array_interface__["data"][0] - HEAD_SIZE
    return base[start:start + HEAD_SIZE + 8 * data.size]


def record_cdr(data: np.ndarray) -> np.ndarray:
    """A record's ``data`` as its serialized message (a uint8 array: the writer numbers it in place)."""
    out = record_buffers(1, data.size)
    out[0] = data
    return message_of(out[0])


@dataclass
class Job:
    """What one chunk needs, picklable: the recording's path, the node's parameters (normalized,
    the model's URDF in ``robot_description`` and ``floating_base`` decided), the input topics by
    role, the description's id, the chunk's index and log-time range [start, stop) (stop None: to
    the end, whose waiting joint states then go on), and either ``warm_from`` (the log time the
    warm-up starts) or ``seed`` (the exact pairing state at ``start``); ``batch``: states per
    horizon call; ``spool``: a folder the command's process reads (a worker process of the same
    machine), where the chunk leaves its records in a file instead of sending them back."""
    input: str
    params: dict
    topics: dict
    description_id: int
    index: int
    start: int
    stop: int | None
    warm_from: int | None = None
    seed: tuple | None = None
    batch: int = 128
    spool: str | None = None        # a folder of the command's machine: the records go to a file there


@dataclass
class ChunkResult:
    """A chunk's records (their number; serialized, their seq still 0, back to back, record k in
    bytes ``offsets[k]:offsets[k + 1]`` of ``payload`` or of the file ``spool``, unless they went
    to the chunk's sink as they were computed), their log times (the moment the node
    would have published each) and stamps; the messages read by role, the drops by reason and an
    example text of each, the records' odometry pairing, the seconds spent per phase, the pairing
    state at the start and at the end, or ``error`` (a problem with the recording, one line)."""
    index: int
    records: int = 0
    payload: np.ndarray | None = None
    spool: str | None = None
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    log_times: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    stamps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    read: dict = field(default_factory=dict)
    dropped: dict = field(default_factory=dict)
    examples: dict = field(default_factory=dict)
    pairing: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    start_state: tuple | None = None
    end_state: tuple | None = None
    error: str | None = None


class _Log:
    """The input side's log lines, kept (the clock resets a recording may hold) rather than printed."""

    def __init__(self):
        self.lines = []

    def info(self, text):
        pass

    def warning(self, text):
        if len(self.lines) < 10:
            self.lines.append(text)


_SETUP: dict = {}     # a worker process's models, by parameters (a process runs many chunks)


def _setup(p: dict):
    """The model, the contacts and loops, the base frame of the parameters (built once per process),
    and the seconds it took now (0 when built before): the model, and the kernels loaded by one
    horizon call at the zero state (as the node warms up when it loads its model)."""
    key = json.dumps(p, sort_keys=True)
    got = _SETUP.get(key)
    if got is not None:
        return got, 0.0
    t0 = time.perf_counter()
    contacts, loops = contact_specs(p), loop_specs(p)
    model, problem = build_model("robot_description", p["robot_description"], p, p["floating_base"], contacts, loops)
    if problem is not None:
        raise BagError(problem)
    base_frame = p["base_frame"] or model.base_name
    zero = sva_linearizer.State(model)
    forces = [np.zeros(c.dim) for c in contacts] if p["contact_mode"] == "forces" and contacts else None
    state = Paired(0, zero.q, zero.v, np.zeros(model.nj), None, None, None, list(contacts) if contacts else None,
                   forces)
    # (a zero state may be singular for the contacts, a straight leg: only the kernels' loading is wanted)
    RecordComputer(model, contacts, loops, p["contact_mode"], p["dt"], (), 1).compute([state])
    got = _SETUP[key] = (model, contacts, loops, base_frame)
    return got, time.perf_counter() - t0


_READERS: dict = {}   # a worker process's open recordings, by path (opening one reads its metadata: ~50 ms)


def _identity(path: str):
    """The path with its size and modification time (and its metadata.yaml's, for a folder): a
    recording written again at the same path is another one."""
    out = [path]
    for p in (path, os.path.join(path, "metadata.yaml")):
        try:
            st = os.stat(p)
        except OSError:
            continue
        out += [st.st_size, st.st_mtime_ns]
    return tuple(out)


def _reader(path: str):
    """The open reader of ``path``, kept for the process's next chunks (the last two recordings)."""
    key = _identity(path)
    reader = _READERS.pop(key, None)
    if reader is None:
        reader = open_reader(path)
        while len(_READERS) >= 2:
            _READERS.pop(next(iter(_READERS))).close()
    _READERS[key] = reader
    return key, reader


def close_readers() -> None:
    """Close the recordings this process keeps open."""
    while _READERS:
        _READERS.popitem()[1].close()


def _fault(job: Job) -> None:
    spec = os.environ.get(FAULT_ENV, "")
    if not spec:
        return
    chunk, _, rest = spec.partition(":")
    marker, _, how = rest.partition(":")
    if int(chunk) != job.index or os.path.exists(marker):
        return
    with open(marker, "w") as f:
        f.write(f"chunk {job.index} failed once\n")
    if how == "exit":
        os._exit(3)
    raise RuntimeError(f"{FAULT_ENV}: chunk {job.index} fails once")


def run_chunk(job: Job, sink=None) -> ChunkResult:
    """The chunk's records and counts (module docstring); a problem with the recording comes back
    as the result's ``error``, anything else raises (the executor retries the chunk). ``sink``
    (messages, log times): takes the records as they are computed, batch by batch, instead of the
    result (the command's own process writes them at once)."""
    _fault(job)
    given = os.environ.get(_THREADS)
    if given is None:
        os.environ[_THREADS] = "1"          # a chunk computes on one thread (unless told otherwise)
    try:
        return _Chunk(job, sink).run()
    except BagError as e:
        return ChunkResult(job.index, error=str(e))
    finally:
        if given is None:
            os.environ.pop(_THREADS, None)


class _Chunk:
    def __init__(self, job: Job, sink=None):
        self.job, self.sink = job, sink
        p = job.params
        (model, contacts, loops, base_frame), start_s = _setup(p)
        self.model = model
        self.computer = RecordComputer(model, contacts, loops, p["contact_mode"], p["dt"], set(p["record_omit"]),
                                       job.description_id, alloc=record_buffers)
        self.records = 0
        self.clock = 0
        self.released = []                  # (Paired, the log time it was handed on)
        self.log = _Log()
        self.examples = {}
        self.inputs = NodeInputs(p, contacts, log=self.log, steady_ns=self._now, now_ns=self._now, emit=self._emit,
                                 on_reject=self._on_reject)
        self.inputs.set_model(model, base_frame)
        self.owned = job.seed is not None   # whether what is handed on now is this chunk's
        self.parts, self.log_times, self.stamps = [], [], []
        self.pairing = {"exact": 0, "nearest": 0}
        self.seconds = {"start": start_s, "read": 0.0, "pair": 0.0, "linearize": 0.0}

    def _pack(self):
        """The records for the command's process: (payload, spool file, offsets)."""
        sizes = np.fromiter((m.size for m in self.parts), dtype=np.int64, count=len(self.parts))
        offsets = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(sizes)])
        if not self.parts:
            return None, None, offsets
        if self.job.spool is not None:
            path = os.path.join(self.job.spool, f"chunk-{self.job.index}-{os.getpid()}-{os.urandom(4).hex()}")
            with open(path, "wb") as f:
                for m in self.parts:
                    f.write(m)
            self.parts = []
            return None, path, offsets
        payload = np.concatenate(self.parts)
        self.parts = []
        return payload, None, offsets

    def _now(self):
        return self.clock

    def _emit(self, st):
        if self.owned:
            self.released.append((st, self.clock))

    def _on_reject(self, key, text):
        if self.owned:
            self.examples.setdefault(key, text)

    def _advance(self, t):
        """The joint states whose wait is over before log time t go on, each at the end of its wait."""
        inputs = self.inputs
        while True:
            deadline = inputs.next_deadline()
            if deadline is None or deadline >= t:
                return
            self.clock = deadline
            inputs.pair_waiting()

    def _compute(self):
        if not self.released:
            return
        t0 = time.perf_counter()
        states = [st for st, _ in self.released]
        outs = self.computer.compute(states)
        t1 = time.perf_counter()
        messages, times = [], []
        for (st, when), out in zip(self.released, outs):
            if out.error is not None:
                self.inputs.reject("linearize", out.error)
                continue
            messages.append(message_of(out.data))
            times.append(when)
            self.stamps.append(st.stamp)
            if st.odom is not None:
                self.pairing["exact" if st.odom.stamp == st.stamp else "nearest"] += 1
        self.released.clear()
        self.records += len(messages)
        self.seconds["linearize"] += t1 - t0
        if self.sink is not None:
            self.sink(messages, times)
        else:
            self.parts += messages
            self.log_times += times

    def _own(self):
        """The chunk's range starts: its pairing state, and what was counted so far is not its own."""
        self._advance(self.job.start)
        self.start_state = self.inputs.snapshot()
        self.released.clear()
        self.before = dict(self.inputs.rejected)
        self.examples.clear()
        self.owned = True

    def run(self) -> ChunkResult:
        job, inputs = self.job, self.inputs
        key, reader = _reader(job.input)
        try:
            handlers, connections = {}, []
            by_role = {"joint_states": inputs.on_joint_state, "odom": inputs.on_odom,
                       "contacts": inputs.on_contacts, "contact_forces": inputs.on_contact_force}
            for role, topic in job.topics.items():
                for c in reader.connections:
                    if c.topic == topic and c.msgtype == ROLES[role][1]:
                        handlers[c.id] = (role, by_role[role], decoder(role))
                        connections.append(c)
            if job.seed is not None:
                inputs.restore(job.seed)
                self.start_state, self.before = job.seed, {}
                begin = job.start
            else:
                self.start_state = None
                begin = job.warm_from
            read = dict.fromkeys(job.topics, 0)
            messages = reader.messages(connections, start=begin, stop=job.stop)
            seconds = self.seconds
            while True:
                t0 = time.perf_counter()
                try:
                    item = next(messages, None)
                except Exception as e:
                    raise BagError(f"{job.input}: cannot be read, truncated or corrupt? "
                                   f"({type(e).__name__}: {' '.join(str(e).split())})") from None
                t1 = time.perf_counter()
                seconds["read"] += t1 - t0
                if item is None:
                    break
                conn, t, raw = item
                if not self.owned and t >= job.start:
                    self._own()
                self._advance(t)
                self.clock = t
                role, handle, decode = handlers[conn.id]
                if self.owned:
                    read[role] += 1
                try:
                    msg = decode(raw)
                except Exception as e:
                    inputs.reject(f"{role}_malformed", f"{role}: a message that does not decode as "
                                                       f"{ROLES[role][1]} ({type(e).__name__}: {e})")
                    continue
                handle(msg, t)
                seconds["pair"] += time.perf_counter() - t1
                if len(self.released) >= job.batch:
                    self._compute()
            if not self.owned:
                self._own()
            t1 = time.perf_counter()
            self._advance(job.stop if job.stop is not None else 2 ** 63)   # the end of the recording: all go
            seconds["pair"] += time.perf_counter() - t1
            end_state = inputs.snapshot()
            self._compute()
        except BaseException:
            _READERS.pop(key, None)
            reader.close()
            raise
        dropped = {k: v - self.before.get(k, 0) for k, v in inputs.rejected.items() if v - self.before.get(k, 0)}
        payload, spool, offsets = self._pack()
        return ChunkResult(job.index, self.records, payload, spool, offsets, np.array(self.log_times, dtype=np.int64),
                           np.array(self.stamps, dtype=np.int64), read, dropped, dict(self.examples), self.pairing,
                           self.seconds, self.log.lines, self.start_state, end_state)
