# SPDX-License-Identifier: BSD-3-Clause
"""The simulator's lockstep loop opens on the controller's first answer: a first state lost before
both ends of a best-effort topic have matched is published again, and the copies' late answers are
taken before the loop starts (so that none is taken as the answer to the next period)."""
import time

from sva_linearizer.ros.demo import sim


class _Link:
    """A controller behind a link that loses the first `lost` states and answers each other one
    after `delay_s`; spin_once delivers the answers that are due."""

    def __init__(self, latest, lost, delay_s=0.0):
        self.latest, self.lost, self.delay_s = latest, lost, delay_s
        self.sent, self.due = 0, []

    def publish_state(self, stamp):
        self.sent += 1
        if self.sent > self.lost:
            self.due.append(time.monotonic() + self.delay_s)

    def spin_once(self, timeout_s):
        time.sleep(timeout_s)
        now = time.monotonic()
        for t in [t for t in self.due if t <= now]:
            self.due.remove(t)
            self.latest.update(n=self.latest["n"] + 1, at=now)


def test_the_first_state_is_sent_again_until_answered():
    latest = {"n": 0, "at": 0.0}
    link = _Link(latest, lost=2)
    link.publish_state(0)
    sent_at = sim._open_loop(link, latest, link.publish_state, 0, timeout_s=5.0)
    assert link.sent == 3 and latest["n"] == 1
    assert latest["at"] >= sent_at


def test_answers_to_copies_are_taken_before_the_loop_starts():
    latest = {"n": 0, "at": 0.0}
    link = _Link(latest, lost=0, delay_s=1.5 * sim.RESEND_S)   # the first copy's answer comes after a resend
    link.publish_state(0)
    sim._open_loop(link, latest, link.publish_state, 0, timeout_s=5.0)
    assert link.sent == 2 and latest["n"] == 2 and not link.due


def test_an_answer_that_never_comes_ends_the_wait():
    latest = {"n": 0, "at": 0.0}
    link = _Link(latest, lost=10 ** 6)
    link.publish_state(0)
    t = time.monotonic()
    sim._open_loop(link, latest, link.publish_state, 0, timeout_s=0.5)
    assert latest["n"] == 0 and 0.5 <= time.monotonic() - t < 2.0 and link.sent >= 4
