"""A CSV file of rows keyed by time step, appended as a run goes and continued on restart."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Sequence


class CSVLog:
    """Rows whose first column is a step, one ``write`` per row, flushed at once (a run killed
    midway keeps its rows, and ``tail -f`` shows them).

    With ``resume_step`` (a restarted run) an existing file with the same columns is continued:
    rows after that step are dropped (the restarted run writes them again) and rows up to it
    are not written twice. Without, the file starts afresh.
    """

    def __init__(self, path: str | Path, columns: Sequence[str],
                 resume_step: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._floor = -1  # rows at or before this step are already in the file
        if resume_step is not None and self.path.exists():
            self._keep_up_to(int(resume_step), list(columns))
            self._floor = int(resume_step)
            self._file = open(self.path, "a", newline="", encoding="utf-8")
            self._rows = csv.writer(self._file)
            return
        self._file = open(self.path, "w", newline="", encoding="utf-8")
        self._rows = csv.writer(self._file)
        self._rows.writerow(columns)
        self._file.flush()

    def _keep_up_to(self, step: int, columns: list[str]) -> None:
        with open(self.path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        if not rows or rows[0] != columns:
            raise ValueError(f"{self.path}: its columns are not {', '.join(columns)}; move "
                             "the old file away or start afresh")
        kept = [rows[0]] + [r for r in rows[1:]  # a row cut short by a kill: dropped
                            if len(r) == len(columns) and int(r[0]) <= step]
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(kept)
        os.replace(tmp, self.path)  # a crash now leaves the old file or the new, never half

    def write(self, row: Sequence[str]) -> None:
        """Append one row (skipped when its step is already in a continued file)."""
        if int(row[0]) <= self._floor:
            return
        self._rows.writerow(row)
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
