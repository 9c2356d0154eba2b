"""Figures drawn from run directories (matplotlib, PNG).

:func:`walk_figure` draws the panels of Hegedűs et al. (2016) Fig. 2 / Fig. 3: per run, the
number of walks propagating concurrently (dots, jittered vertically to show density) and the
step count of the oldest propagating walk (coloured by walk id), with the theoretical maximum
progress t/δ_rw and the time-averaged number of walks in the title; time in the unit of the
run's duration (:func:`netsim.plotting.time_unit`: hours for the paper's two-day runs).
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np

from netsim.analysis.runs import load_run, load_run_scenario
from netsim.errors import RunDirectoryError
from netsim.plotting import pyplot, time_unit
from netsim.storage import atomic_write_bytes


def _walk_title(scenario, mean_walks: float) -> str:
    walk = scenario.walk
    delta = scenario.gossip.period
    drw = walk.transfer_time / delta
    extra = (walk.timeout - walk.transfer_time) / delta
    variant = "" if walk.preset == "paper" else f", {walk.preset}' variant"
    return (
        f"δ_rw = {drw:g}Δ, δ = δ_rw + {extra:g}Δ, kill {walk.kill_probability:.0%}{variant}\n"
        f"N = {scenario.nodes}, mean concurrent walks {mean_walks:.3f}"
    )


def walk_figure(run_dirs: list[Path], out: Path, *, columns: int = 3, seed: int = 0) -> Path:
    """Draw one Fig. 2-style panel per walk-service run into the PNG ``out``."""
    plt = pyplot()
    if not run_dirs:
        raise RunDirectoryError("walk_figure needs at least one run directory")
    columns = min(columns, len(run_dirs))
    rows = math.ceil(len(run_dirs) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.9 * rows), squeeze=False)
    jitter = np.random.default_rng(seed)  # only for drawing: density of integer dots
    for ax, run_dir in zip(axes.ravel(), run_dirs, strict=False):
        tables = load_run(run_dir, parameters=False)
        scenario = load_run_scenario(run_dir)
        if scenario.walk is None or scenario.walk.kind != "service" or "walk_samples" not in tables:
            raise RunDirectoryError(f"{run_dir}: not a run of the random walk service")
        samples = tables["walk_samples"]
        unit = time_unit(scenario.duration)
        times = samples["time"].to_numpy() / unit.seconds
        count = samples["propagating"].to_numpy()
        ax.scatter(
            times,
            count + jitter.uniform(-0.15, 0.15, count.size),
            s=3,
            color="tab:green",
            alpha=0.6,
            label="walks propagating",
        )
        ax.set_xlabel(unit.label())
        ax.set_ylabel("number of walks", color="tab:green")
        ax.set_ylim(bottom=-0.5, top=max(3.5, float(count.max()) + 0.5))
        ax.yaxis.get_major_locator().set_params(integer=True)
        steps_ax = ax.twinx()
        alive = samples["oldest_walk"].to_numpy() >= 0
        walk_ids = samples["oldest_walk"].to_numpy()[alive]
        steps_ax.scatter(
            times[alive],
            samples["oldest_steps"].to_numpy()[alive],
            s=2,
            c=walk_ids % 20,
            cmap="tab20",
            vmin=0,
            vmax=19,
        )
        start = scenario.walk.start
        t_end = scenario.duration
        steps_ax.plot(
            [start / unit.seconds, t_end / unit.seconds],
            [0, (t_end - start) / scenario.walk.transfer_time],
            color="black",
            linewidth=0.8,
            linestyle="--",
            label="t/δ_rw",
        )
        steps_ax.set_ylabel("step count of the oldest walk")
        steps_ax.set_ylim(bottom=0)
        mean_walks = float(tables["walk_summary"]["mean_propagating"].iloc[0])
        ax.set_title(_walk_title(scenario, mean_walks), fontsize=9)
    for ax in axes.ravel()[len(run_dirs) :]:
        ax.set_visible(False)
    fig.tight_layout()
    return save_figure(fig, out)


def save_figure(fig, out: Path, *, tight: bool = False) -> Path:
    """Write ``fig`` to the PNG ``out`` atomically (an interrupted run leaves no half image)
    and close it; ``tight`` crops to what is drawn, so a legend outside the axes is kept."""
    buffer = io.BytesIO()
    try:
        if tight:
            fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight", pad_inches=0.12)
        else:
            fig.savefig(buffer, format="png", dpi=110)
    finally:
        pyplot().close(fig)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, buffer.getvalue())
    return out
