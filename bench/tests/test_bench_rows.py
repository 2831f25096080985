"""The feature rows (bench/rows.py and its report): which frameworks take part, what a
variant durq cannot run yet becomes, the figures each part keeps, and the targets they
are checked against. No Redis, no peer: synthetic runs and results."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from bench_modules import BENCH, load_bench_module


@pytest.fixture(scope="module")
def rows() -> ModuleType:
    return load_bench_module("rows.py", "bench_rows")


@pytest.fixture(scope="module")
def report() -> ModuleType:
    return load_bench_module("report.py", "bench_report_rows")


@pytest.fixture(scope="module")
def targets() -> ModuleType:
    """bench/report_row_targets.py (report.py puts bench/ on sys.path for it)."""
    sys.path.insert(0, str(BENCH))
    try:
        return load_bench_module("report_row_targets.py", "bench_row_targets")
    finally:
        sys.path.remove(str(BENCH))


@pytest.fixture(scope="module")
def run() -> ModuleType:
    return load_bench_module("run.py", "bench_run_rows")


def drain_run(done: int, rate: float, wall: float, **server: Any) -> dict[str, Any]:
    run: dict[str, Any] = {
        "done": done, "target": done, "complete": True, "rate": rate, "wall_s": wall,
        "startup_s": 0.5, "drain_s": wall - 0.5, "desc": "a worker",
    }  # fmt: skip
    if server:
        run["server"] = {"cpu_s": 0.3, "client": {}, **server}
    return run


SKIP = "not available in this durq: no durq.Batch"
X = "\N{MULTIPLICATION SIGN}"  # as the report prints it


def peer_run(name: str, row_names: tuple[str, ...], variants: dict[str, Any]) -> Any:
    meta = SimpleNamespace(name=name, rows=row_names, classic=True)
    return SimpleNamespace(meta=meta, hello={"rows": variants}, res={"errors": []})


def test_a_drain_part_keeps_its_rate_overall_rate_and_cost_per_job(rows: Any) -> None:
    runs = [
        drain_run(2000, 400.0, 8.0, client={"calls": 6000, "usec": 12000}),
        drain_run(2000, 500.0, 5.0, client={"calls": 6000, "usec": 18000}),
    ]
    entry = rows.part_entry("drain", runs)
    assert entry["rate"]["median"] == 450.0
    assert entry["overall"] == {"median": 325.0, "min": 250.0, "max": 400.0, "n": 2}
    assert entry["per_job"]["commands"]["median"] == 3.0
    assert entry["per_job"]["server_us"]["median"] == 7.5
    assert entry["per_job"]["store_statements"] is None  # durq has no store of its own
    store = {"statements": 2700, "exec_us": 9e4}
    run = drain_run(100, 50.0, 2.0, client={"calls": 0, "usec": 0}, store=store)
    with_store = rows.part_entry("drain", [run])
    assert with_store["per_job"]["store_statements"]["median"] == 27.0
    assert with_store["per_job"]["store_us"]["median"] == 900.0


def test_every_fresh_start_counts_in_the_startup_median(rows: Any) -> None:
    entry = rows.part_entry("startup", [{"starts": [0.3, 0.2, 0.9]}, {"starts": [0.4, 0.25]}])
    assert entry["starts"] == [0.3, 0.2, 0.9, 0.4, 0.25]
    assert entry["startup_s"]["median"] == 0.3 and entry["startup_s"]["n"] == 5


def test_an_asleep_part_keeps_slots_bytes_and_idle_commands(rows: Any) -> None:
    run = {"n": 100, "asleep": 50, "waiting": 50, "slots_held": 50, "settle_s": 3.0,
           "redis_bytes_per_job": 0.0, "store_bytes_per_job": 600.0,
           "redis_commands_per_s": 0.0, "store_statements_per_s": 500.0}  # fmt: skip
    entry = rows.part_entry("asleep", [run])
    assert entry["n"] == 100 and entry["slots_held"]["median"] == 50
    assert entry["store_statements_per_s"]["median"] == 500.0


def test_a_row_takes_only_the_frameworks_that_list_it(rows: Any) -> None:
    phase = rows.row_phase(rows.Settings.quick(), "batch", None)
    assert phase.takes(peer_run("celery-batches", ("batch",), {}))
    assert not phase.takes(peer_run("rq", ("startup",), {}))
    assert phase.store_all  # durq's skipped variants are stored though nothing ran


def test_a_variant_durq_cannot_run_is_stored_as_skipped_and_never_run(rows: Any) -> None:
    variants = {
        "batch": [
            {"part": "per job", "label": "async def task", "kind": "bulk_job", "mode": "p2"},
            {"part": "per batch", "label": "durq.Batch", "kind": "b", "mode": "b", "skip": SKIP},
            {"part": "latency", "label": "max_wait", "kind": "b", "mode": "b", "skip": SKIP},
        ]
    }
    pr = peer_run("durq", ("batch",), variants)
    phase = rows.row_phase(rows.Settings.quick(), "batch", None)
    assert [label for label, _ in phase.turn(pr)] == ["batch [per job: async def task]"]
    runs = {"batch [per job: async def task]": [drain_run(5000, 7000.0, 1.5)]}
    phase.store(pr, runs)
    stored = pr.res["rows"]["batch"]
    assert [e["part"] for e in stored] == ["per job", "per batch", "latency"]
    assert stored[0]["rate"]["median"] == 7000.0
    assert stored[1]["skip"] == SKIP and "runs" not in stored[1]


def test_a_variant_that_failed_is_left_out_and_nothing_is_stored_for_no_variant(
    rows: Any,
) -> None:
    variants = {"pool": [{"part": "cpu", "label": "-P prefork", "kind": "cpu", "mode": "x"}]}
    pr = peer_run("celery", ("pool",), variants)
    rows.row_phase(rows.Settings.quick(), "pool", None).store(pr, {})
    assert "rows" not in pr.res


def test_variant_filter_matches_label_part_or_configuration(rows: Any) -> None:
    e = {"part": "per batch", "label": "durq.Batch(max_size=100)", "mode": "batch-p2"}
    assert rows.wanted(e, None) and rows.wanted(e, "Batch") and rows.wanted(e, "per batch")
    assert rows.wanted(e, "batch-p2") and not rows.wanted(e, "prefork")


def test_a_scenario_run_starts_only_the_peers_of_the_rows_asked(run: Any) -> None:
    peers = [n for n in run.PEERS if run.takes_part(n, ("durable",))]
    assert peers == ["durq", "dbos"]
    assert [n for n in run.PEERS if run.takes_part(n, ("pool",))] == ["durq", "celery"]
    assert "dbos" not in [n for n in run.PEERS if run.takes_part(n, ("io_redis", "startup"))]
    assert run.row_sweeps("pool", run.Settings.quick(), None) == [
        ("pool.cpu", 1_000),
        ("pool.io_redis", 5_000),
        ("pool.noop", 5_000),
    ]


def test_every_row_part_has_a_size_in_both_modes(run: Any) -> None:
    """Per run: a part's size times the rounds (startup: fresh starts per turn)."""
    full, quick = run.Settings(), run.Settings.quick()
    for row, parts in run.ROW_PARTS.items():
        for part in parts:
            key = f"{row}.{part}"
            assert full.row_n[key] * full.repeat >= quick.row_n[key] * quick.repeat > 0


def test_a_variants_scale_multiplies_its_parts_size_in_both_modes(rows: Any) -> None:
    for settings in (rows.Settings(), rows.Settings.quick()):
        n = settings.row_n["batch.per batch"]
        assert rows.part_size(settings, "batch", {"part": "per batch"}) == n
        assert rows.part_size(settings, "batch", {"part": "per batch", "scale": 5}) == 5 * n


def test_durqs_two_batch_drains_are_scaled_alike(durq_peer: Any) -> None:
    """The ratio of the batch row compares drains of as many items."""
    drains = {v["part"]: v for v in durq_peer.rows()["batch"] if v["part"] != "latency"}
    assert set(drains) == {"per job", "per batch"}
    assert drains["per job"]["scale"] == drains["per batch"]["scale"] > 1


# ------------------------------------------------------------------ the report


def variant(part: str, label: str, **fields: Any) -> dict[str, Any]:
    return {"part": part, "label": label, "desc": f"`{label}`", "procs": 2, **fields}


def rate(median: float) -> dict[str, Any]:
    return {"median": median, "min": median, "max": median, "n": 1}


def results(durq_rows: dict[str, Any], peers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A results.json with only what the report's feature rows and targets read."""
    out: dict[str, Any] = {
        "started": "2026-11-28 01:00:00 +0000", "command": "run.py", "quick": True,
        "settings": {"enqueue_n": 1, "bulk_batch": 1, "drain_n": 1, "drain_cap": 1.0,
                     "latency_n": 1, "latency_interval": 0.01, "memory_n": 1, "repeat": 1},
        "machine": {"cpus": 2, "platform": "linux", "python": "3.11"},
        "peers": {"durq": {"name": "durq", "display": "durq", "rows": durq_rows}},
    }  # fmt: skip
    for name, row_entries in peers.items():
        out["peers"][name] = {"name": name, "display": name, "rows": row_entries}
    return out


def target_rows(targets: Any, res: dict[str, Any]) -> dict[str, tuple[str, str]]:
    durq = res["peers"]["durq"]
    others = {k: p for k, p in res["peers"].items() if k != "durq"}
    return {name: (text, mark) for name, text, mark in targets.row_targets(durq, others)}


def test_a_skipped_durq_variant_shows_its_reason_and_the_anchors_figure(
    targets: Any, report: Any, tmp_path: Path
) -> None:
    res = results(
        {"batch": [variant("per job", "async def task", rate=rate(7000.0)),
                   variant("per batch", "durq.Batch(max_size=100)", skip=SKIP)]},
        {"celery-batches": {"batch": [variant("per batch", "Batches", rate=rate(1900.0))]}},
    )  # fmt: skip
    got = target_rows(targets, res)
    text, mark = got[f"batch items/s ≥ 5{X} per job, and > celery-batches (issue 36)"]
    assert mark == targets.PENDING
    assert SKIP in text and "celery-batches 1,900/s" in text and "per job 7,000/s" in text
    out = tmp_path / "RESULTS.md"
    report.write_markdown(res, None, out, None)
    page = out.read_text()
    assert "### Batch consumption against celery-batches (issue 36)" in page
    cells = "| per batch | durq | durq.Batch(max_size=100) | `durq.Batch(max_size=100)` |"
    assert f"{cells} skipped: {SKIP} |" in page


def test_a_drain_cell_gives_the_items_of_its_runs(report: Any, tmp_path: Path) -> None:
    run = drain_run(100_000, 60_000.0, 2.5)
    res = results(
        {"batch": [variant("per batch", "durq.Batch", rate=rate(60_000.0), runs=[run])]}, {}
    )
    out = tmp_path / "RESULTS.md"
    report.write_markdown(res, None, out, None)
    line = next(x for x in out.read_text().splitlines() if x.startswith("| per batch | durq"))
    assert "60,000 items/s (100,000 items a run; overall" in line


def test_the_batch_target_needs_five_times_per_job_and_more_than_celery_batches(
    targets: Any,
) -> None:
    def verdict(batch: float) -> str:
        res = results(
            {"batch": [variant("per job", "job", rate=rate(2000.0)),
                       variant("per batch", "durq.Batch", rate=rate(batch))]},
            {"celery-batches": {"batch": [variant("per batch", "Batches", rate=rate(1900.0))]}},
        )  # fmt: skip
        return target_rows(targets, res)[
            f"batch items/s ≥ 5{X} per job, and > celery-batches (issue 36)"
        ][1]

    assert verdict(10_000.0) == "✔ met"
    assert verdict(9_000.0) == "✘ missed"


def test_the_durable_target_is_three_times_dbos_with_the_cost_per_step(targets: Any) -> None:
    per_job = {"commands": rate(6.0), "server_us": rate(45.0)}
    res = results(
        {"durable": [variant("drain", f"3 {X} durq.step", rate=rate(600.0), per_job=per_job)]},
        {"dbos": {"durable": [variant("drain", f"3 {X} @DBOS.step", rate=rate(200.0))]}},
    )
    text, mark = target_rows(targets, res)[f"durable workflows/s ≥ 3{X} DBOS Transact (issue 37)"]
    assert mark == "✔ met"
    assert f"3.0{X} dbos" in text and "per step 2.00 commands, 15.0 server µs" in text


def test_sleeping_jobs_must_hold_no_slot_and_idle_workers_barely_talk(targets: Any) -> None:
    name = (
        "jobs asleep hold 0 slots; idle workers ≤ 1 Redis command/s per process (the "
        "registry heartbeat; no polling) (issue 37)"
    )

    def verdict(held: float, cmds: float) -> str:
        figures = {"slots_held": rate(held), "redis_commands_per_s": rate(cmds),
                   "redis_bytes_per_job": rate(300.0)}  # fmt: skip
        asleep = variant("asleep", "durq.sleep", **figures)
        return target_rows(targets, results({"durable": [asleep]}, {}))[name][1]

    assert verdict(0, 0.8) == "✔ met"  # 2 processes: up to 2 commands/s
    assert verdict(0, 2.5) == "✘ missed"
    assert verdict(3, 0.0) == "✘ missed"


def test_startup_targets_hold_each_worker_to_its_bound(targets: Any) -> None:
    res = results(
        {"startup": [variant("start", "`durq worker`", startup_s=rate(0.24)),
                     variant("start", "`durq worker -p 2`", startup_s=rate(0.4))]},
        {"huey": {"startup": [variant("start", "default", startup_s=rate(0.19))]}},
    )  # fmt: skip
    got = target_rows(targets, res)
    one = got["startup of `durq worker` ≤ 0.25 s to the first job (issue 33)"]
    two = got["startup of `durq worker -p 2` ≤ 0.35 s to the first job (issue 33)"]
    assert one[1] == "✔ met" and two[1] == "✘ missed"
    assert "fastest peer: huey (default) 0.19 s" in one[0]


def test_the_pool_targets_compare_with_celery_prefork_and_report_the_overhead(
    targets: Any,
) -> None:
    lat = {"p50_ms": rate(1.0), "p99_ms": rate(3.0)}
    res = results(
        {"pool": [variant("cpu", "--pool process", rate=rate(900.0)),
                  variant("noop", "--pool process", rate=rate(2000.0)),
                  variant("noop", "threads", rate=rate(5000.0)),
                  variant("latency", "--pool process", p50_ms=rate(0.9), p99_ms=rate(3.5))]},
        {"celery": {"pool": [variant("cpu", "-P prefork", rate=rate(800.0)),
                             variant("latency", "-P prefork", **lat)]}},
    )  # fmt: skip
    got = target_rows(targets, res)
    assert got["process pool ≥ Celery prefork, CPU-bound (issue 33)"][1] == "✔ met"
    assert got["process-pool pickup latency below Celery prefork's (issue 33)"][1] == "✘ missed"
    overhead = got["process pool's overhead per no-op job against the thread pool (issue 33)"]
    assert overhead == ("500 µs/job vs 200 (+300 µs)", targets.REPORTED)


def test_the_overall_rate_of_a_datastore_bound_drain_counts_its_startup(
    report: Any, tmp_path: Path
) -> None:
    res = results({}, {})
    res["peers"]["durq"]["work"] = {
        "io_redis": [
            {"label": "async def, 1 process", "desc": "`durq worker -p 1 -c 100`",
             "procs": 1, "slots": 100, "complete": True,
             "rate": rate(11_300.0), "overall": rate(8_500.0),
             "runs": [{**drain_run(5000, 11_300.0, 0.6), "startup_s": s} for s in (0.6, 0.7, 0.62)]}
        ]
    }  # fmt: skip
    out = tmp_path / "RESULTS.md"
    report.write_markdown(res, None, out, None)
    table = out.read_text().split("### The datastore-bound drains overall", 1)[1]
    line = next(x for x in table.splitlines() if x.startswith("| durq (async def"))
    assert (
        line
        == "| durq (async def, 1 process) | `durq worker -p 1 -c 100` | 11,300 | 8,500 | 0.62 |"
    )


# ------------------------------------------------------------------ durq's declarations


@pytest.fixture
def durq_peer(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """bench/peers/durq.py with bench/ on sys.path (its imports: probe, work, peers)."""
    monkeypatch.setenv("BENCH_REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.syspath_prepend(str(BENCH))
    for name in [m for m in sys.modules if m == "peers" or m.startswith("peers.")]:
        monkeypatch.delitem(sys.modules, name)
    return importlib.import_module("peers.durq")


def test_durq_declares_every_feature_variant_and_skips_what_it_lacks(
    durq_peer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    features = durq_peer.durq_features
    lacking = {"startup": None, "pool": "`durq worker` has no --pool option",
               "batch": "no durq.Batch", "durable": "no durq.step nor durq.sleep"}  # fmt: skip
    monkeypatch.setattr(features, "missing", lambda: lacking)
    declared = durq_peer.rows()
    assert set(declared) == {"startup", "pool", "batch", "durable"}
    specs = durq_peer.worker_specs()
    for row, variants in declared.items():
        for v in variants:
            assert v["mode"] in specs, v
            if row in ("startup",) or v["label"] in ("threads", "async def task"):
                assert "skip" not in v, v
            else:
                assert v["skip"] == f"not available in this durq: {lacking[row]}", v
    assert "--pool" in specs["pool-c2"]["argv"][0] and "--url" in specs["pool-c2"]["argv"][0]


def test_the_detection_answers_for_every_row_of_the_tree_measured(durq_peer: Any) -> None:
    """Whatever this tree has: a reason or None for each row, startup always runnable."""
    why = durq_peer.durq_features.missing()
    assert set(why) == {"startup", "pool", "batch", "durable"} and why["startup"] is None
    assert all(reason is None or isinstance(reason, str) for reason in why.values())
