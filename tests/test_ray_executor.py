"""``--executor ray`` on a real two-node Ray cluster on 127.0.0.1: the same rows as the local pool, and faults.

The cluster (a head and one more node, one CPU and one declared GPU each) is started with
``ray start`` like a user's, bounded in time, and stopped after the module. Every check here
can fail: the equivalence compares every row's code hash and verdict with a local run; the
fault tests kill a real worker or actor process in the middle of its job.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from ptxprobe.core.cache import Cache  # noqa: E402
from ptxprobe.core.cluster import local_cluster  # noqa: E402
from ptxprobe.core.processes import alive, descendants, proc_argv  # noqa: E402
from ptxprobe.static.experiment import load_experiment, override, parse_assignments  # noqa: E402
from ptxprobe.static.sweep import run_sweep  # noqa: E402
from tests.conftest import REPRO_SMALL  # noqa: E402
from tests.recorded_env import needs_recorded_triton  # noqa: E402

pytestmark = pytest.mark.integration

SETS = ["repeat=1", "causal=false,true"]  # 2 archs x 2 causal x 3 names = 12 assemblies
ASSEMBLIES = 12


@pytest.fixture(scope="module")
def cluster():
    """A head and a second node on 127.0.0.1 (one CPU and one declared GPU each); yields the address."""
    with local_cluster(nodes=2, cpus_per_node=1, gpus_per_node=1) as address:
        yield address


@pytest.fixture(scope="module")
def exp():
    return override(load_experiment(REPRO_SMALL), parse_assignments(SETS))


@pytest.fixture(scope="module")
def local_rows(exp, tmp_path_factory):
    d = tmp_path_factory.mktemp("local")
    return run_sweep(exp, d / "out", jobs=2, cache=Cache(d / "cache"), progress=False).rows


def _facts(rows: list[dict]) -> dict:
    return {r["variant_id"]: (r["status"], r["code_sha256"], r["registers"], r["verdict"]) for r in rows}


def _executor_record(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())["counts"]["executor"]


def test_ray_sweep_gives_the_local_rows_and_fills_the_driver_cache(cluster, exp, local_rows, tmp_path):
    cache = Cache(tmp_path / "cache")
    res = run_sweep(exp, tmp_path / "ray", cache=cache, progress=False, executor="ray", ray_address=cluster)
    assert len(res.rows) == len(local_rows) == ASSEMBLIES
    assert _facts(res.rows) == _facts(local_rows)
    assert all(not r["cached"] for r in res.rows)
    used = _executor_record(tmp_path / "ray")
    assert used["kind"] == "ray" and used["nodes"] == 2
    assert len(used["tasks_by_node"]) == 2, used  # both nodes assembled
    assert sum(used["tasks_by_node"].values()) == ASSEMBLIES
    # the driver wrote the cache: a second sweep is served from it, with no task sent
    again = run_sweep(exp, tmp_path / "again", cache=cache, progress=False, executor="ray", ray_address=cluster)
    assert all(r["cached"] for r in again.rows)
    assert _facts(again.rows) == _facts(local_rows)
    assert not _executor_record(tmp_path / "again").get("tasks_by_node")


def test_interrupted_ray_sweep_resumes_like_a_local_one(cluster, exp, local_rows, tmp_path):
    cache = Cache(tmp_path / "cache")
    first = run_sweep(exp, tmp_path / "out", cache=cache, progress=False, executor="ray", ray_address=cluster,
                      max_variants=7)
    assert first.ran == 7
    rest = run_sweep(exp, tmp_path / "out", cache=cache, progress=False, executor="ray", ray_address=cluster)
    assert rest.skipped == 7 and rest.ran == ASSEMBLIES - 7
    ids = [json.loads(ln)["variant_id"] for ln in (tmp_path / "out" / "variants.jsonl").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == ASSEMBLIES
    assert _facts(rest.rows) == _facts(local_rows)


def _cluster_roots(address: str) -> set[int]:
    """The processes of one cluster: those whose command line names its GCS port (its gcs_server and every node's
    raylet, parents of the workers). Nothing else on the machine is looked at beyond that."""
    port = re.compile(rf"[:=]{re.escape(address.rsplit(':', 1)[1])}(?!\d)")
    return {int(d.name) for d in Path("/proc").iterdir()
            if d.name.isdigit() and any(port.search(a) for a in proc_argv(int(d.name)))}


def _titled(prefix: str, roots: set[int]) -> set[tuple[int, str]]:
    """Ray processes (pid, start time) below ``roots`` whose title starts with ``prefix``."""
    return {(pid, start) for pid, start in descendants(roots) if (proc_argv(pid) or [""])[0].startswith(prefix)}


def _kill_first(prefix: str, roots: set[int], deadline_s: float, stop: threading.Event | None = None) -> int | None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and not (stop and stop.is_set()):
        pids = sorted(_titled(prefix, roots))
        if pids:
            os.kill(pids[0][0], signal.SIGKILL)
            return pids[0][0]
        time.sleep(0.01)
    return None


def test_a_worker_killed_mid_task_loses_and_duplicates_nothing(cluster, local_rows, tmp_path):
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "ptxprobe", "rename-sweep", "-e", str(REPRO_SMALL), "--set", "repeat=1",
            "--set", "causal=false,true", "--executor", "ray", "--ray-address", cluster, "-o", str(out),
            "--no-cache", "--no-run", "-q"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = _kill_first("ray::remote_assembly", _cluster_roots(cluster), 120)
    stdout, stderr = proc.communicate(timeout=300)
    assert killed is not None, "no task was ever seen running"
    assert proc.returncode == 1, stderr[-2000:]  # the names change code: exit 1, not a failure
    ids = [json.loads(ln)["variant_id"] for ln in (out / "variants.jsonl").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == ASSEMBLIES  # every assembly once
    rows = [json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines()]
    assert all(r["status"] == "ok" for r in rows)
    expected = {(r["kernel"], r["arch"], r["name_template"]): r["code_sha256"] for r in local_rows}
    assert {(r["kernel"], r["arch"], r["name_template"]): r["code_sha256"] for r in rows} == expected


def test_a_task_whose_every_worker_dies_is_a_retriable_row_and_resume_redoes_it(cluster, exp, local_rows, tmp_path,
                                                                                monkeypatch):
    from ptxprobe.static import ray_executor

    monkeypatch.setattr(ray_executor, "TASK_RETRIES", 0)  # so one kill exhausts the task's retries
    stop, killed = threading.Event(), []
    roots = _cluster_roots(cluster)
    killer = threading.Thread(target=lambda: killed.append(_kill_first("ray::remote_assembly", roots, 120, stop)))
    killer.start()
    try:
        first = run_sweep(exp, tmp_path / "out", cache=Cache(tmp_path / "cache"), progress=False, executor="ray",
                          ray_address=cluster)
    finally:
        stop.set()
        killer.join()
    assert killed and killed[0] is not None
    lost = [r for r in first.rows if r["status"] == ray_executor.WORKER_LOST]
    assert len(lost) == 1 and lost[0]["retriable"] and "lost 1 times" in lost[0]["error"]
    assert first.failed == lost  # said as a failure, never as a result
    again = run_sweep(exp, tmp_path / "out", cache=Cache(tmp_path / "cache"), progress=False, executor="ray",
                      ray_address=cluster)
    assert again.ran == 1 and again.skipped == ASSEMBLIES - 1
    assert _facts(again.rows) == _facts(local_rows)


def test_ctrl_c_stops_a_local_ray_sweep_keeps_its_rows_and_leaves_no_ray_behind(cluster, tmp_path):
    """Without --ray-address a Ray instance of its own is started (not the cluster above) and stopped."""
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "ptxprobe", "rename-sweep", "-e", str(REPRO_SMALL), "--set", "repeat=1",
            "--set", "causal=false,true", "--executor", "ray", "-j", "2", "-o", str(out), "--no-cache", "--no-run",
            "-q"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 120
    log = out / "variants.jsonl"
    own: set = set()  # the sweep's own Ray: below it while it runs, by pid and start time after
    interrupted = threading.Event()

    def watch() -> None:  # a scan of the process tree takes long on a loaded machine: never between row and signal
        while not interrupted.is_set():
            own.update(_titled("ray::", {proc.pid}))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    while not (log.exists() and log.read_text().strip()) and time.monotonic() < end:  # some rows finished
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    interrupted.set()
    watcher.join()
    assert own, "no Ray worker seen while the sweep ran"
    stopped = time.monotonic()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    assert time.monotonic() - stopped < 30
    assert "Traceback" not in stderr
    kept = (out / "variants.jsonl").read_text().splitlines()
    assert 0 < len(kept) < ASSEMBLIES
    time.sleep(1)
    assert not alive(own), "the sweep's own Ray instance outlived it"
    # resumed by the local pool: what the interrupted Ray run kept is what any resume starts from (a Ray resume on
    # the cluster is test_interrupted_ray_sweep_resumes_like_a_local_one); a second Ray start costs most of this test
    local = [a for a in argv if a != "ray" and a != "--executor"]
    resumed = subprocess.run(local, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 1, resumed.stderr[-2000:]
    assert f"{ASSEMBLIES - len(kept)} assembled, {len(kept)} already done" in resumed.stdout


def test_repro_through_the_cluster_reproduces_the_committed_run(cluster, tmp_path):
    from ptxprobe.reports import repro

    committed = Path(__file__).resolve().parent.parent / "experiments" / "results" / "2026-12-02-cpu-repro-small"
    needs_recorded_triton(committed)
    out = repro.repro(committed, tmp_path / "again", executor="ray", ray_address=cluster)
    assert out.ok and out.rows and not out.problems
    manifests = list((tmp_path / "again").glob("*/manifest.json"))
    assert manifests and all(json.loads(m.read_text())["counts"]["executor"]["kind"] == "ray" for m in manifests)


def test_a_worker_without_the_planned_ptxas_fails_that_task_clearly(cluster, exp, tmp_path):
    from ptxprobe.sources import sources_of
    from ptxprobe.static.plan import plan_emitted
    from ptxprobe.static.ray_executor import TOOL_MISMATCH, remote_assembly
    from ptxprobe.toolchain.tools import discover

    cache = Cache(tmp_path / "cache")
    src = sources_of(exp)[0]
    planned = plan_emitted(exp, src, src.emit("sm_90a", cache), discover(), cache)[0]
    stranger = replace(planned, tool=replace(planned.tool, sha256="0" * 64, version="0.0.0"))
    ray.init(address=cluster)
    try:
        task = ray.remote(num_cpus=1)(remote_assembly)
        good = ray.get(task.remote((planned,), 120.0), timeout=300)
        bad = ray.get(task.remote((stranger,), 120.0), timeout=300)
    finally:
        ray.shutdown()
    assert good.rows[0]["status"] == "ok" and good.cubin is not None
    assert bad.rows[0]["status"] == TOOL_MISMATCH and bad.rows[0]["retriable"] and bad.cubin is None
    assert "sha256 000000000000 is not here" in bad.rows[0]["error"]
    assert "a different binary" in bad.rows[0]["error"]  # the plan's path holds another build


def test_worker_tool_finds_the_planned_binary_elsewhere(tmp_path):
    from ptxprobe.core.errors import ToolMismatch
    from ptxprobe.static.ray_executor import worker_tool
    from ptxprobe.toolchain.tools import find_tool, identify

    real = find_tool("ptxas")
    copy = tmp_path / "ptxas"
    copy.write_bytes(Path(real.path).read_bytes())
    copy.chmod(0o755)
    planned = identify(copy, "ptxas", "test")
    assert worker_tool(planned).path == str(copy)
    with open(copy, "ab") as f:  # the binary at the plan's path changes under it
        f.write(b"\0")
    found = worker_tool(planned)
    assert found.sha256 == planned.sha256 and found.path != str(copy)
    with pytest.raises(ToolMismatch, match="a different binary"):
        worker_tool(replace(planned, sha256="f" * 64, version="0.0.0"))


# --- GPU actors: routing and loss, with the timing replaced by a recorded sleep ---------------


def _slow_work(group, seconds):
    start = time.time()
    time.sleep(seconds)
    return {"group": group, "start": start, "end": time.time(), "pid": os.getpid()}


def _connect(address: str) -> None:
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
    ray.init(address=address)


def test_gpu_groups_go_to_an_actor_of_their_arch_one_at_a_time(cluster):
    from ptxprobe.gpu.ray_timing import route_groups, start_actors

    _connect(cluster)
    try:
        head = ray.get_runtime_context().get_node_id()

        def arch_probe():
            return "sm_90a" if ray.get_runtime_context().get_node_id() == head else "sm_80"

        actors = start_actors(work=_slow_work, arch_probe=arch_probe)
        assert sorted(a.arch for a in actors) == ["sm_80", "sm_90a"]
        groups = {"sm_90a": [f"h{i}" for i in range(4)], "sm_80": [f"n{i}" for i in range(3)], "sm_75": ["x"]}
        done: list[tuple] = []
        left = route_groups(actors, groups, (0.2,), lambda g, res, actor: done.append((g, res, actor.arch)))
    finally:
        ray.shutdown()
    assert left == ["x"]  # no GPU of that arch: said, not run
    assert sorted(g for g, _, _ in done) == sorted(groups["sm_90a"] + groups["sm_80"])
    for g, res, arch in done:
        assert res["group"] == g and arch == ("sm_90a" if g.startswith("h") else "sm_80")
    by_pid: dict[int, list] = {}
    for _, res, _ in done:
        by_pid.setdefault(res["pid"], []).append((res["start"], res["end"]))
    assert len(by_pid) == 2
    for spans in by_pid.values():  # an actor never ran two groups at once
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_a_lost_gpu_actor_hands_its_group_to_another(cluster):
    from ptxprobe.gpu.ray_timing import route_groups, start_actors

    _connect(cluster)
    stop = threading.Event()
    try:
        actors = start_actors(work=_slow_work, arch_probe=lambda: "sm_90a")
        groups = {"sm_90a": [f"g{i}" for i in range(5)]}
        done: list[str] = []
        roots = _cluster_roots(cluster)
        killer = threading.Thread(target=lambda: killed.append(_kill_first("ray::TimingWorker.run", roots, 60,
                                                                                           stop)))
        killed: list = []
        killer.start()
        route_groups(actors, groups, (0.5,), lambda g, res, actor: done.append(g))
        stop.set()
        killer.join()
    finally:
        ray.shutdown()
    assert killed and killed[0] is not None
    assert sorted(done) == groups["sm_90a"]  # every group once, the lost one re-run on the other actor


@pytest.fixture(autouse=True)
def _no_session_left():
    yield
    assert not ray.is_initialized(), "a test left its Ray session open"
