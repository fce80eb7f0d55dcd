"""The learning-curve plot written at the end of every run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["plot_learning_curve"]


def plot_learning_curve(
    episodes: Sequence[tuple[int, float]], path: str | Path, *, title: str = "", window: int = 10
) -> Path:
    """Plot episode returns against frames, with a ``window``-episode running mean, to a PNG.

    Args:
        episodes: ``(frames at episode end, return)`` pairs, in order.
        path: where the PNG goes.
        title: the figure's title.
        window: episodes in the running mean.

    Example:
        >>> import tempfile, os
        >>> with tempfile.TemporaryDirectory() as d:
        ...     p = plot_learning_curve([(10, 1.0), (25, 3.0), (30, 2.0)], os.path.join(d, "c.png"))
        ...     p.stat().st_size > 1000
        True
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    path = Path(path)
    frames = [f for f, _ in episodes]
    returns = [r for _, r in episodes]
    running = []
    for i in range(len(returns)):
        tail = returns[max(0, i + 1 - window) : i + 1]
        running.append(sum(tail) / len(tail))
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    try:
        ax.plot(frames, returns, ".", alpha=0.3, label="episode return")
        ax.plot(frames, running, "-", label=f"mean of last {window}")
        ax.set_xlabel("frames")
        ax.set_ylabel("return")
        ax.set_title(title)
        ax.legend(loc="lower right")
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path
