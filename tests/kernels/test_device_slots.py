"""Admission to the device's shared side: at most K children hold it at once (kernels.parent.isolation.lock_broker)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernels.parent.isolation.lock_broker import SLOTS_ENV, LockBroker, shared_slots_wanted


def answers(broker: LockBroker) -> bytes:
    """What the parent told the child so far ("1" granted, "0" busy, one per line)."""
    os.set_blocking(broker.child_fd, False)
    try:
        return os.read(broker.child_fd, 64)
    except BlockingIOError:
        return b""


def brokers(tmp_path: Path, count: int, slots: int) -> list[LockBroker]:
    return [LockBroker(tmp_path / "cuda0.lock", slots) for _ in range(count)]


def test_with_one_slot_a_second_shared_taker_waits_for_the_first_to_let_go(tmp_path: Path) -> None:
    first, second = brokers(tmp_path, 2, slots=1)
    try:
        assert first.request({"op": "shared", "wait": True}) is False and answers(first) == b"1\n"
        assert second.request({"op": "shared", "wait": True}) is True  # it must wait: no slot is free
        assert not second.poll() and answers(second) == b""
        first.request({"op": "release"})
        assert second.poll() and answers(second) == b"1\n" and second.held == "shared"
        assert first.request({"op": "shared", "wait": False}) is False and answers(first) == b"0\n"
    finally:
        for broker in (first, second):
            broker.close()


def test_a_timer_needs_no_slot_and_a_closed_child_gives_its_slot_back(tmp_path: Path) -> None:
    holder, timer, later = brokers(tmp_path, 3, slots=1)
    try:
        holder.request({"op": "shared", "wait": True})
        assert timer.request({"op": "exclusive", "wait": True}) is True  # waits for the shared holder only
        holder.close()  # the child ended: its hold and its slot are let go
        assert timer.poll() and timer.held == "exclusive"
        assert later.request({"op": "shared", "wait": True}) is True  # behind the timer, not behind a slot
        timer.request({"op": "release"})
        assert later.poll() and later.slot_held == 0
    finally:
        for broker in (holder, timer, later):
            broker.close()


def test_k_slots_let_k_shared_holders_in_and_no_limit_lets_everyone_in(tmp_path: Path) -> None:
    limited = brokers(tmp_path / "limited", 4, slots=3)
    unlimited = brokers(tmp_path / "unlimited", 4, slots=0)
    try:
        assert [b.request({"op": "shared", "wait": True}) for b in limited] == [False, False, False, True]
        assert sorted(b.slot_held for b in limited[:3]) == [0, 1, 2]  # type: ignore[type-var]
        assert [b.request({"op": "shared", "wait": True}) for b in unlimited] == [False] * 4
        slot = limited[1].slot_held
        limited[1].request({"op": "shared", "wait": True})  # a let-timers-in (release, take) lets timers in only
        assert limited[1].held == "shared" and not limited[3].poll()
        limited[1].request({"op": "release"})
        assert limited[3].poll() and limited[3].slot_held == slot  # the slot went to the one that waited
    finally:
        for broker in (*limited, *unlimited):
            broker.close()


def test_the_setting_is_a_count_or_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SLOTS_ENV, "4")
    assert shared_slots_wanted() == 4
    monkeypatch.setenv(SLOTS_ENV, "0")
    assert shared_slots_wanted() == 0
    monkeypatch.delenv(SLOTS_ENV)
    assert shared_slots_wanted() == 0  # no limit by default
    for bad in ("-1", "four"):
        monkeypatch.setenv(SLOTS_ENV, bad)
        with pytest.raises(ValueError, match="STARK_DEVICE_SLOTS"):
            shared_slots_wanted()
