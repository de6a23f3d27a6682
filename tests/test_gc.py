"""The collector pause: restores what it found, and lets the collector run around a wait."""

from __future__ import annotations

import gc
import threading

import pytest

from priority_kafka._gc import gc_paused, gc_running


@pytest.fixture(autouse=True)
def _collector_enabled_again():
    yield
    gc.enable()


def test_a_pause_disables_the_collector_and_enables_it_again_even_on_error():
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_the_application_disabled_stays_disabled():
    gc.disable()
    with gc_paused(), gc_running():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_running_inside_a_pause_enables_the_collector_for_the_block_only():
    with gc_paused():
        with gc_running():
            assert gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_running_outside_a_pause_changes_nothing():
    with gc_running():
        assert gc.isenabled()
    assert gc.isenabled()


def test_a_pause_on_another_thread_is_not_this_threads_to_lift():
    paused, release = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            paused.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    try:
        assert paused.wait(10)
        with gc_running():  # not inside a pause of this thread: leaves it alone
            assert not gc.isenabled()
    finally:
        release.set()
        thread.join(10)
    assert gc.isenabled()
