"""The connection budget: per client address, in all, and the loopback headroom."""

from __future__ import annotations

import pytest

from vgpu_extender.serving.budget import Caps, ConnectionBudget, Refusal
from vgpu_extender.serving.limits import LimitError, caps_for, reserved_files
from vgpu_extender.settings import Settings


def test_each_address_is_held_to_its_own_cap() -> None:
    budget = ConnectionBudget(Caps(total=100, per_client=2, headroom=0))
    assert budget.admit("10.0.0.1") is None
    assert budget.admit("10.0.0.1") is None
    assert budget.admit("10.0.0.1") is Refusal.PER_CLIENT
    # Another address still has its own budget.
    assert budget.admit("10.0.0.2") is None
    assert (budget.held("10.0.0.1"), budget.held("10.0.0.2"), budget.total) == (2, 1, 3)


def test_a_released_connection_frees_its_place() -> None:
    budget = ConnectionBudget(Caps(total=100, per_client=1, headroom=0))
    assert budget.admit("10.0.0.1") is None
    assert budget.admit("10.0.0.1") is Refusal.PER_CLIENT
    budget.release("10.0.0.1")
    assert (budget.held("10.0.0.1"), budget.total) == (0, 0)
    assert budget.admit("10.0.0.1") is None


def test_the_total_refuses_everyone_but_the_headroom_addresses() -> None:
    budget = ConnectionBudget(Caps(total=3, per_client=10, headroom=2))
    for client in ("10.0.0.1", "10.0.0.2", "127.0.0.2"):
        assert budget.admit(client) is None
    # Full: a remote client, and a loopback address other than 127.0.0.1, are refused.
    assert budget.admit("10.0.0.3") is Refusal.TOTAL
    assert budget.admit("127.0.0.2") is Refusal.TOTAL
    # kube-scheduler's addresses get the headroom, and no more.
    assert budget.admit("127.0.0.1") is None
    assert budget.admit("::1") is None
    assert budget.admit("::ffff:127.0.0.1") is Refusal.TOTAL
    assert budget.total == 5


def test_the_headroom_addresses_have_no_per_client_cap() -> None:
    budget = ConnectionBudget(Caps(total=10, per_client=1, headroom=5))
    assert budget.admit("127.0.0.1") is None
    # kube-scheduler opens a connection per concurrent call: past the per-client cap,
    # up to the total plus the headroom.
    for _ in range(14):
        assert budget.admit("127.0.0.1") is None
    assert budget.admit("127.0.0.1") is Refusal.TOTAL
    assert (budget.held("127.0.0.1"), budget.total) == (15, 15)
    # Another address is still held to its own cap.
    other = ConnectionBudget(Caps(total=10, per_client=1, headroom=5))
    assert other.admit("10.0.0.1") is None
    assert other.admit("10.0.0.1") is Refusal.PER_CLIENT
    assert other.admit("127.0.0.2") is None
    assert other.admit("127.0.0.2") is Refusal.PER_CLIENT
    # ::1 is exempt as well.
    for _ in range(8):
        assert other.admit("::1") is None
    assert other.total == 10


def test_releasing_a_connection_never_admitted_is_an_error() -> None:
    budget = ConnectionBudget(Caps(total=1, per_client=1, headroom=0))
    with pytest.raises(ValueError, match=r"'10\.0\.0\.9'"):
        budget.release("10.0.0.9")


def test_caps_unset_fit_under_the_file_limit() -> None:
    settings = Settings(max_connections_per_client=32, loopback_headroom=16)
    caps = caps_for(settings, file_limit=1024)
    assert caps.total == 1024 - reserved_files(settings) - 16
    assert (caps.per_client, caps.headroom) == (32, 16)
    # With a large limit, the default ceiling.
    assert caps_for(settings, file_limit=1_000_000).total == 4096


def test_caps_past_the_file_limit_are_refused_with_the_numbers() -> None:
    settings = Settings(max_connections=2000, loopback_headroom=64)
    with pytest.raises(LimitError, match=r"max_connections \(2000\).*open-file limit \(1024\)"):
        caps_for(settings, file_limit=1024)
    with pytest.raises(LimitError, match=r"open-file limit \(200\) leaves no room"):
        caps_for(Settings(), file_limit=200)
