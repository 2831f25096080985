"""bench/results.png: the chart of RESULTS.md (matplotlib, from the bench-tools venv):
enqueue and drain rates, pickup latency and memory per peer, and a panel per real-work
scenario."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from report_format import classic_rows
from report_work import SCENARIOS, work_label, work_rate, work_rows


def work_panels(fig: Any, grid: Any, results: dict[str, Any]) -> None:
    """The chart's bottom row: one panel per real-work scenario, durq in blue."""
    short_title = {
        "io_redis": "One Redis round trip per job",
        "io_sleep": "10 ms wait per job",
        "cpu": "2 ms of CPU per job",
    }
    for col, scenario in enumerate(SCENARIOS):
        ax = fig.add_subplot(grid[2, 2 * col : 2 * col + 2])
        rows = sorted(work_rows(results, scenario), key=lambda pe: work_rate(pe[1]) or 0)
        ys = range(len(rows))
        vals = [work_rate(e) or 0 for _, e in rows]
        colors = ["tab:blue" if p["name"] == "durq" else "tab:gray" for p, _ in rows]
        ax.barh(list(ys), vals, color=colors)
        ax.set_yticks(list(ys))
        ax.set_yticklabels(
            [work_label(p, e).replace("(RedisHuey)", "").replace("taskiq ", "taskiq\n")
             for p, e in rows],
            fontsize=7,
        )  # fmt: skip
        for y, (v, (_, e)) in enumerate(zip(vals, rows, strict=True)):
            ratio = e.get("ratio")
            text = f" {v:,.0f}" + (f" ({ratio * 100:.0f}%)" if ratio is not None else "")
            ax.text(v, y, text, va="center", fontsize=7)
        ax.set_xlim(0, max(vals or [1]) * 1.35)
        ax.xaxis.set_major_formatter(lambda v, _pos: f"{v / 1000:g}k" if v >= 1000 else f"{v:g}")
        ax.set_title(f"{short_title[scenario]}: jobs/s (% of limit)", fontsize=10)
        ax.grid(axis="x", alpha=0.3)


def write_chart(results: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    peers = [(n, p) for n, p in classic_rows(results) if not p.get("skipped")]
    if not peers:
        return False
    short = {"taskiq": "taskiq\n(stream)", "taskiq-list": "taskiq\n(list)", "huey": "Huey"}
    labels = [short.get(n, p["display"]) for n, p in peers]
    has_work = any(work_rows(results, sc) for sc in SCENARIOS)
    fig = plt.figure(figsize=(15, 16 if has_work else 10))
    grid = fig.add_gridspec(
        3 if has_work else 2, 6, height_ratios=[1, 1, 1.2][: 3 if has_work else 2]
    )
    axes = [[fig.add_subplot(grid[r, 0:3]), fig.add_subplot(grid[r, 3:6])] for r in (0, 1)]

    def bars(
        ax: Any, series: list[tuple[str, Any]], title: str, unit: str, log: bool = False
    ) -> None:
        width = 0.8 / len(series)
        for i, (label, getter) in enumerate(series):
            meds, lo, hi = [], [], []
            for _, p in peers:
                s = getter(p)
                if s:
                    meds.append(s["median"])
                    lo.append(s["median"] - s["min"])
                    hi.append(s["max"] - s["median"])
                else:
                    meds.append(0)
                    lo.append(0)
                    hi.append(0)
            xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(peers))]
            ax.bar(xs, meds, width, yerr=[lo, hi], capsize=2, label=label)
        ax.set_xticks(range(len(peers)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_title(title)
        ax.set_ylabel(unit)
        if log:
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)

    def rate(key: str) -> Any:
        return lambda p: (p.get(key) or {}).get("rate")

    bars(
        axes[0][0],
        [("single", rate("enqueue_single")), ("bulk", rate("enqueue_bulk"))],
        "Enqueue rate (higher is better; no bar = no bulk API)",
        "jobs/s",
        log=True,
    )
    bars(
        axes[0][1],
        [("1 worker, defaults", rate("drain_default")), ("best on 2 cores", rate("drain_best"))],
        "Drain rate of queued no-op jobs (higher is better)",
        "jobs/s",
        log=True,
    )
    bars(
        axes[1][0],
        [
            (k.split("_")[0], (lambda p, k=k: (p.get("latency") or {}).get(k)))
            for k in ("p50_ms", "p99_ms", "max_ms")
        ],
        "Enqueue-to-start latency, idle worker (lower is better)",
        "ms",
        log=True,
    )

    def mem(p: dict[str, Any]) -> Any:
        m = p.get("memory")
        return (
            {"median": m["bytes_per_job"], "min": m["bytes_per_job"], "max": m["bytes_per_job"]}
            if m
            else None
        )

    bars(axes[1][1], [("bytes/job", mem)], "Redis memory per queued job (lower is better)", "bytes")
    if has_work:
        work_panels(fig, grid, results)
    srv = results.get("server", {})
    fig.suptitle(
        f"durq bench — {srv.get('flavor')} {srv.get('version')}, "
        f"{results['machine']['cpus']} CPUs, {results['started']}"
        + (" (quick)" if results.get("quick") else "")
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
