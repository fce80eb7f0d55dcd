"""Run logging: one CSV per run (always), TensorBoard too when it is installed."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from pathlib import Path

__all__ = ["RunLogger", "read_log"]

LOG_NAME = "log.csv"


class RunLogger:
    """Writes scalar rows to ``{run_dir}/log.csv`` (and TensorBoard when asked and installed).

    Every row has a ``frames`` column (the step) and one column per scalar name, e.g.
    ``losses/objective`` or ``charts/frames_per_s``. A name first seen in a later row
    widens the header (the file is rewritten once, keeping earlier rows).

    Args:
        run_dir: the run's directory; created if missing.
        tensorboard: also write TensorBoard events under ``{run_dir}/tb`` when
            ``torch.utils.tensorboard`` imports; silently CSV-only otherwise.
        append: keep an existing ``log.csv`` (a resumed run) instead of starting anew.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     log = RunLogger(d)
        ...     log.log(100, {"losses/a": 1.5})
        ...     log.log(200, {"losses/a": 1.0, "eval/return": 9.0})
        ...     log.close()
        ...     rows = read_log(d)
        >>> [(r["frames"], r["losses/a"], r["eval/return"]) for r in rows]
        [(100.0, 1.5, nan), (200.0, 1.0, 9.0)]
    """

    def __init__(self, run_dir: str | Path, *, tensorboard: bool = False, append: bool = False):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / LOG_NAME
        self._columns: list[str] = ["frames"]
        self._rows: list[dict[str, float]] = []
        if append and self.path.exists():
            self._rows = read_log(self.run_dir)
            if self._rows:
                self._columns = list(self._rows[0])
        self._file = None
        self._writer = None
        self._rewrite()
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                self._tb = None
            else:
                self._tb = SummaryWriter(log_dir=str(self.run_dir / "tb"))

    def _rewrite(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = open(self.path, "w", newline="")  # noqa: SIM115 - held open for the run
        self._writer = csv.DictWriter(self._file, fieldnames=self._columns, restval="")
        self._writer.writeheader()
        for row in self._rows:
            self._writer.writerow(row)
        self._file.flush()

    def log(self, frames: int, scalars: Mapping[str, float]) -> None:
        """Append one row at step ``frames``.

        Example:
            >>> import tempfile
            >>> with tempfile.TemporaryDirectory() as d:
            ...     log = RunLogger(d)
            ...     log.log(1, {"x": 2})
            ...     log.close()
            ...     read_log(d)[0]["x"]
            2.0
        """
        row = {"frames": float(frames), **{k: float(v) for k, v in scalars.items()}}
        self._rows.append(row)
        new = [k for k in row if k not in self._columns]
        if new:
            self._columns += new
            self._rewrite()
        else:
            self._writer.writerow(row)
            self._file.flush()
        if self._tb is not None:
            for key, value in scalars.items():
                self._tb.add_scalar(key, float(value), global_step=int(frames))

    @property
    def rows(self) -> list[dict[str, float]]:
        """Every row logged so far (including rows kept from an appended file)."""
        return list(self._rows)

    def close(self) -> None:
        """Flush and close the CSV (and TensorBoard) files."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def read_log(run_dir: str | Path) -> list[dict[str, float]]:
    """Read a run's ``log.csv`` back as rows of floats (empty cells are NaN).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     read_log(d)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        FileNotFoundError: no log.csv in ... expected a run directory written by RunLogger; pass the run's directory
    """
    path = Path(run_dir) / LOG_NAME
    if not path.exists():
        raise FileNotFoundError(
            f"no {LOG_NAME} in {run_dir}: expected a run directory written by RunLogger; "
            "pass the run's directory"
        )
    with open(path, newline="") as fh:
        return [
            {k: (float(v) if v != "" else math.nan) for k, v in row.items()}
            for row in csv.DictReader(fh)
        ]
