# SPDX-License-Identifier: BSD-3-Clause
"""``sva-linearizer bag``: a recording's joint states linearized as the node would, into a rosbag2.

:func:`linearize_bag` reads the recording's metadata, builds the model the node's parameters name
(or the recording's first robot description), splits the recording into chunks by log time
(time ranges of about ``chunk_states`` joint states), runs them (:func:`.chunk.run_chunk`) in this
process, in ``workers`` processes, or on a Dask cluster, and writes their records in order.

The output does not depend on where or in how many parts it ran:

* in this process, each chunk starts from the exact pairing state the chunk before ended with: one
  pass over the recording, as the node;
* in parallel, each chunk starts with a warm-up over the span before its range (the longest
  pairing window plus a margin) and records its pairing state at the start of its range; where
  that state differs from the one the chunk before ended with, the chunk is run again from that
  exact state. So every chunk's records are those of one pass, whatever the split;
* records are written in the order the node would publish them (stamp order, except across a
  clock reset), numbered 1, 2, ... in that order, each chunk's once: a chunk that fails is run
  again (by Dask's retries, or here for a process of ``workers`` that died) and only its one
  result is written.

The description's ``run`` and ``id`` derive from the recording (its topics, message counts, times)
and the parameters, so the same input gives the same output, byte for byte.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import dataclass, field

from sva_linearizer._jit import COMPILE_ENV
from sva_linearizer.labels import z_names

from ..node.inputs import same_snapshot
from ..node.node import build_model
from ..node.parameters import contact_specs, loop_specs, normalize_parameters
from ..node.record import RECORD_FORMAT, description_json
from .chunk import Job, close_readers, run_chunk
from .output import RecordWriter
from .recording import BagError, description_from_recording, input_topics, open_reader, resolve

#: joint states per chunk by default (about 2 s at 1 kHz: 70 MB of solo12's full records)
CHUNK_STATES = 2000
#: the most a chunk's warm-up reaches back (s); a longer pairing window is settled by the seam check
MAX_WARMUP_S = 10.0
#: tries per chunk (a failed one is run again)
TRIES = 3


@dataclass
class Summary:
    """What a run did: the messages read by role, the records written, the drops by reason (as the
    node names them) with an example text each, the records' odometry pairing, the seconds per phase
    summed over the chunks (read, pair, linearize: with the record's encoding) and of writing, the
    chunks, those run again from the exact state, the wall-clock seconds, the input side's warnings."""
    input: str
    output: str
    storage: str
    workers: int
    where: str
    read: dict = field(default_factory=dict)
    records: int = 0
    dropped: dict = field(default_factory=dict)
    examples: dict = field(default_factory=dict)
    pairing: dict = field(default_factory=lambda: {"exact": 0, "nearest": 0})
    seconds: dict = field(default_factory=dict)
    chunks: int = 0
    reruns: int = 0
    wall_s: float = 0.0
    start_s: float = 0.0
    warnings: list = field(default_factory=list)
    floating_base: bool = True

    @property
    def states(self) -> int:
        return self.read.get("joint_states", 0)

    def lines(self) -> list:
        """The summary as the command prints it."""
        rate = self.states / self.wall_s if self.wall_s > 0 else 0.0
        others = ", ".join(f"{n:,} {r}" for r, n in self.read.items() if r != "joint_states")
        rej = ", ".join(f"{k} {v:,}" for k, v in sorted(self.dropped.items())) or "none"
        out = [f"read {self.states:,} joint states" + (f" ({others})" if others else "") + f" from {self.input}; "
               f"wrote {self.records:,} records to {self.output} ({self.storage}); dropped: {rej}"]
        pairing = (f"; odometry exact {self.pairing['exact']:,}, nearest {self.pairing['nearest']:,}"
                   if self.floating_base else "")
        per = f", {rate / self.workers:,.0f} per worker" if self.workers > 1 else ""
        out.append(f"{self.wall_s:.1f} s ({self.start_s:.1f} s of it a worker's start: the model, its kernels), "
                   f"{rate:,.0f} states/s on {self.workers} worker{'s' if self.workers > 1 else ''} ({self.where})"
                   f"{per}; {self.chunks} chunks"
                   + (f", {self.reruns} run again from the exact pairing state" if self.reruns else "") + pairing)
        if self.states:
            us = {k: v / self.states * 1e6 for k, v in self.seconds.items()}
            out.append("per state: " + ", ".join(f"{k} {v:.0f} us" for k, v in us.items())
                       + " (the workers' reading, pairing, linearizing; writing the output)")
        for key in sorted(self.examples):
            out.append(f"  {key}: {self.examples[key]}")
        out += [f"  warning: {w}" for w in self.warnings]
        return out


def _model_xml(source: str, value: str) -> str:
    """The URDF text of the model source (what the workers build the model from)."""
    if source == "robot_description":
        return value
    if source == "robot":
        from sva_linearizer.robots import robot_urdf_path
        value = str(robot_urdf_path(value))
    try:
        with open(value, "rb") as f:
            return f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BagError(f"{source}: cannot read {value} ({e})") from None


def _run_id(reader, topics: dict, params: dict, namespace: str) -> str:
    """32 hex digits from the recording's inputs (topics, types, message counts, times) and the
    parameters: the description's ``run``, the same for the same input."""
    h = hashlib.sha256()
    ident = {"format": RECORD_FORMAT, "namespace": namespace, "params": params,
             "start": reader.start_time, "end": reader.end_time,
             "topics": {role: [topic, sorted((c.msgtype, c.msgcount) for c in conns)]
                        for role, (topic, conns) in sorted(topics.items())}}
    h.update(json.dumps(ident, sort_keys=True).encode())
    return h.hexdigest()[:32]


class _Local:
    """Chunks in this process, one after the other (each from the exact state the one before ended
    with), their records written as they are computed."""
    where = "this process"
    parallel = False
    sink = None

    def submit(self, job):
        return run_chunk(job, self.sink)

    def result(self, future):
        return future

    def close(self):
        pass


class _Pool:
    """Chunks in `workers` processes of this machine (spawned: each imports this copy of the
    package). A process that dies breaks the pool: a new one takes the chunks that were running."""
    parallel = True

    def __init__(self, workers: int):
        self.workers = workers
        self.where = f"{workers} processes"
        self._new()

    def _new(self):
        import concurrent.futures
        import multiprocessing

        spawn = multiprocessing.get_context("spawn")
        self.pool = concurrent.futures.ProcessPoolExecutor(self.workers, mp_context=spawn)

    def submit(self, job):
        return [job, self.pool.submit(run_chunk, job), 1]

    def result(self, future):
        from concurrent.futures.process import BrokenProcessPool

        while True:
            job, f, tries = future
            try:
                return f.result()
            except BrokenProcessPool:
                if tries >= TRIES:
                    raise BagError(f"chunk {job.index}: its worker process ended {tries} times") from None
                self.pool.shutdown(wait=False, cancel_futures=True)
                self._new()
            except Exception as e:
                if tries >= TRIES:
                    raise BagError(f"chunk {job.index} failed {tries} times: {type(e).__name__}: {e}") from None
            future[1], future[2] = self.pool.submit(run_chunk, job), tries + 1

    def close(self):
        self.pool.shutdown(wait=True, cancel_futures=True)


class _Dask:
    """Chunks on a Dask distributed cluster (its scheduler's address, or a distributed.Client):
    each a task with Dask's retries."""
    parallel = True

    def __init__(self, address):
        try:
            from distributed import Client
        except ImportError as e:
            raise BagError(f"--dask needs dask.distributed ({e}): pip install 'sva_linearizer[dask]'") from None
        if isinstance(address, Client):
            self.client, self._own = address, False
        else:
            try:
                self.client, self._own = Client(address, timeout=20), True
            except Exception as e:
                raise BagError(f"--dask {address}: no Dask scheduler there ({type(e).__name__}: {e})") from None
        self.where = f"Dask at {self.client.scheduler.address}"
        self.token = os.urandom(6).hex()      # task keys of this run only
        self.workers = max(1, len(self.client.scheduler_info().get("workers", {})))

    def submit(self, job):
        key = f"sva-linearizer-bag-{self.token}-{job.index}-{'seed' if job.seed is not None else 'warm'}"
        return self.client.submit(run_chunk, job, key=key, pure=False, retries=TRIES - 1)

    def result(self, future):
        try:
            return future.result()
        except Exception as e:
            raise BagError(f"a chunk failed on the Dask cluster ({TRIES} tries): {type(e).__name__}: {e}") from None

    def close(self):
        if self._own:
            self.client.close()


def linearize_bag(input: str, output: str, parameters: dict | None = None, *, namespace: str = "",
                  workers: int = 1, dask=None, storage: str = "mcap", chunk_states: int = CHUNK_STATES,
                  batch: int = 128, progress=None) -> Summary:
    """Linearize the recording ``input`` into the rosbag2 ``output`` (module docstring) with the
    node's ``parameters``; ``namespace``: the node's (relative topics resolve in it); ``workers``:
    processes of this machine; ``dask``: a Dask scheduler's address (or a distributed.Client),
    instead; ``storage``: "mcap" or "sqlite3"; ``progress``: a .progress.Progress (or None), told
    the joint states done after each chunk. -> Summary.
    Raises BagError (one line) for a problem with the recording, the parameters or the output.

    The kernels run compiled throughout (SVA_LINEARIZER_COMPILE=wait unless it is set: in a cold
    cache they compile first, once per machine), so that no record depends on whether it was
    computed before or after a background compile ended; the worker processes inherit it."""
    policy = os.environ.get(COMPILE_ENV)
    if policy is None:
        os.environ[COMPILE_ENV] = "wait"
    try:
        return _linearize_bag(input, output, parameters, namespace, workers, dask, storage, chunk_states, batch,
                              progress)
    finally:
        if policy is None:
            os.environ.pop(COMPILE_ENV, None)


def _linearize_bag(input, output, parameters, namespace, workers, dask, storage, chunk_states, batch,
                   progress) -> Summary:
    t_start = time.perf_counter()
    try:
        p = normalize_parameters(parameters or {})
        contacts, loops = contact_specs(p), loop_specs(p)
    except ValueError as e:
        raise BagError(str(e)) from None
    if workers < 1:
        raise BagError(f"--workers {workers}: expected 1 or more")
    reader = open_reader(input)
    try:
        source = next((k for k in ("robot_description", "urdf_path", "robot") if p[k]), None)
        if source is None:
            source, value = "robot_description", description_from_recording(
                reader, resolve(p["robot_description_topic"], namespace), input)
        else:
            value = p[source]
        model, problem = build_model(source, value, p, p["floating_base"], contacts, loops)
        if problem is not None:
            raise BagError(problem)
        topics = input_topics(reader, p, namespace, model.floating_base, input)
        job_params = dict(p, robot_description=_model_xml(source, value), urdf_path="", robot="",
                          floating_base=model.floating_base)
        run = _run_id(reader, topics, job_params, namespace)
        start, end = reader.start_time, reader.end_time
        states = sum(c.msgcount for c in topics["joint_states"][1])
    finally:
        reader.close()

    description_id = int(run[:8], 16) % (2 ** 31 - 2) + 1          # as the node draws it, from `run`
    base_frame = p["base_frame"] or model.base_name
    description = description_json(description_id, model, z_names(model), contacts, p["contact_mode"], p["dt"],
                                   sorted(set(p["record_omit"])), base_frame, loops, run)
    executor = _Dask(dask) if dask is not None else _Pool(workers) if workers > 1 else _Local()
    n_workers = getattr(executor, "workers", 1)
    chunks = max(1, math.ceil(states / max(1, chunk_states)))
    if executor.parallel:
        chunks = max(chunks, min(2 * n_workers, max(1, states // 64)))
    bounds = [start + (end - start) * k // chunks for k in range(chunks)] + [None]
    warm = min(MAX_WARMUP_S, 2.0 * max(p["max_odom_age"], p["max_contacts_age"]) + p["odom_wait"] + 0.05)
    warm_ns = int(warm * 1e9)
    job_topics = {role: topic for role, (topic, _) in topics.items()}

    def job(k, seed=None):
        first = k == 0
        return Job(input, job_params, job_topics, description_id, k, bounds[k], bounds[k + 1],
                   warm_from=None if seed is not None else bounds[k] if first else max(start, bounds[k] - warm_ns),
                   seed=seed, batch=batch, spool=spool)

    spool = None        # worker processes of this machine leave their records in files (RecordWriter.spool)

    summary = Summary(input, output, storage, n_workers, executor.where, chunks=chunks,
                      floating_base=model.floating_base)
    if progress is not None:
        progress.total = states
    writer = None
    try:
        writer = RecordWriter(output, storage, namespace)
        writer.description(description, start)
        if not executor.parallel:
            if storage == "mcap":                # (sqlite3's connection stays in its own thread)
                writer.background()              # the records written while the next are computed
            executor.sink = writer.records
        elif isinstance(executor, _Pool):
            spool = writer.spool
        window = 2 * n_workers + 1 if executor.parallel else 1
        futures, submitted, end_state = {}, 0, None
        for k in range(chunks):
            if not executor.parallel:
                futures[k] = executor.submit(job(k, seed=end_state if k else None))
            while executor.parallel and submitted < chunks and submitted < k + window:
                futures[submitted] = executor.submit(job(submitted))
                submitted += 1
            res = executor.result(futures.pop(k))
            if res.error is None and k and not same_snapshot(res.start_state, end_state):
                summary.reruns += 1                      # its warm-up did not reach the exact state
                res = executor.result(executor.submit(job(k, seed=end_state)))
            if res.error is not None:
                raise BagError(res.error)
            writer.chunk(res)                 # (in this process: written already)
            _add(summary, res)
            end_state = res.end_state
            if progress is not None:
                progress.update(summary.states)
        writer.close()
        summary.seconds["write"] = writer.seconds
        writer = None
    finally:
        if writer is not None:
            writer.abort()
        executor.close()
        close_readers()
        if progress is not None:
            progress.close()
    summary.wall_s = time.perf_counter() - t_start
    return summary


def _add(summary: Summary, res) -> None:
    """One chunk's counts into the summary."""
    for role, n in res.read.items():
        summary.read[role] = summary.read.get(role, 0) + n
    summary.records += res.records
    for key, n in res.dropped.items():
        summary.dropped[key] = summary.dropped.get(key, 0) + n
    for key, text in res.examples.items():
        summary.examples.setdefault(key, text)
    for key, n in res.pairing.items():
        summary.pairing[key] += n
    for key, s in res.seconds.items():
        if key == "start":
            summary.start_s = max(summary.start_s, s)
        else:
            summary.seconds[key] = summary.seconds.get(key, 0.0) + s
    for w in res.warnings:
        if w not in summary.warnings and len(summary.warnings) < 5:
            summary.warnings.append(w)


def default_workers() -> int:
    """The CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)
