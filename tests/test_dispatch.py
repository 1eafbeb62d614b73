"""Multi-GPU dispatch, tested on CPU with a stand-in for the GPU work (no GPU needed)."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from ptxprobe.gpu.dispatch import dispatch
from tests.workers_fake import failing_group, fake_group

pytestmark = pytest.mark.unit


def read(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_two_devices_share_the_groups_and_never_overlap_on_one(tmp_path):
    log = tmp_path / "log.jsonl"
    groups = [{"group_id": f"g{i}"} for i in range(8)]
    dispatch(groups, ["0", "1"], fake_group, str(log), 0.2)
    rows = read(log)
    assert sorted(r["group"] for r in rows) == sorted(g["group_id"] for g in groups)  # each exactly once
    by_device = defaultdict(list)
    for r in rows:
        assert r["visible"] == r["device"]  # the worker sees only its own GPU
        by_device[r["device"]].append((r["start"], r["end"]))
    assert set(by_device) == {"0", "1"}
    for spans in by_device.values():
        spans.sort()
        assert all(
            a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False)
        )  # one at a time
    # the two devices did work at the same time: wall time close to half the serial time
    wall = max(r["end"] for r in rows) - min(r["start"] for r in rows)
    assert wall < 0.75 * sum(r["end"] - r["start"] for r in rows)


def test_one_device_runs_in_process_in_order(tmp_path):
    log = tmp_path / "log.jsonl"
    dispatch([{"group_id": "a"}, {"group_id": "b"}], ["0"], fake_group, str(log), 0.0)
    assert [r["group"] for r in read(log)] == ["a", "b"]


def test_a_dying_worker_is_reported_and_finished_groups_kept(tmp_path):
    log = tmp_path / "log.jsonl"
    groups = [{"group_id": "g-bad"}] + [{"group_id": f"g{i}"} for i in range(4)]
    with pytest.raises(RuntimeError, match="worker"):
        dispatch(groups, ["0", "1"], failing_group, str(log), 0.05)
    done = [r["group"] for r in read(log)]
    assert sorted(done) == ["g0", "g1", "g2", "g3"]  # the surviving worker finished every other group, once each
