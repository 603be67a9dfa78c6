"""Progress a person can follow, on a terminal or in a log file.

:func:`progress_bar` gives a tqdm bar when the stream is a terminal. When it is not (output sent to a
file, a pipe, a CI log) tqdm prints nothing useful (carriage-return redraws, or nothing with
``disable=None``), so the bar is replaced by :class:`LineProgress`: one plain line each time another
``every_pct`` percent is done or ``every_s`` seconds have passed, and a last line at the end.
``update(0)`` is a heartbeat: it prints only when the time is due, so a caller inside a long step can
show that it is alive.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["LineProgress", "progress_bar"]


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _duration(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else (f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")


class LineProgress:
    """A bar's interface (``update``, ``close``, ``n``, ``set_postfix``, ``format_dict['elapsed']``,
    a context manager) that prints plain lines: ``desc: 12/64 q (19%), 1m05s, ~4m38s left``."""

    def __init__(self, total: int | None, desc: str = "", unit: str = "it", *, file: TextIO | None = None,
                 every_pct: float = 10.0, every_s: float = 30.0, disable: bool = False, clock=time.monotonic):
        self.total, self.desc, self.unit = total, desc, unit.strip()
        self.file = file if file is not None else sys.stderr
        self.every_pct, self.every_s = every_pct, every_s
        self.disable = disable
        self.n = 0
        self._clock = clock
        self._t0 = self._last = clock()
        self._next_pct = every_pct
        self._postfix = ""
        self._printed_at: int | None = None
        self._closed = False

    @property
    def format_dict(self) -> dict[str, Any]:
        return {"n": self.n, "total": self.total, "elapsed": self._clock() - self._t0}

    def set_postfix(self, ordered_dict: dict | None = None, refresh: bool = True, **kw: Any) -> None:
        items = {**(ordered_dict or {}), **kw}
        self._postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def update(self, n: int = 1) -> None:
        if self.disable or self._closed:
            return
        self.n += n
        now = self._clock()
        due = False
        if self.total:
            pct = 100.0 * self.n / self.total
            if pct >= self._next_pct or (self.n >= self.total and self._printed_at != self.n):
                due = True
                while self._next_pct <= pct:
                    self._next_pct += self.every_pct
        finished = bool(self.total) and self.n >= self.total and self._printed_at == self.n
        if due or (now - self._last >= self.every_s and not finished):  # the time: a heartbeat
            self._print(now)

    def _print(self, now: float) -> None:
        elapsed = now - self._t0
        head = f"{self.desc}: " if self.desc else ""
        if self.total:
            line = f"{head}{self.n}/{self.total} {self.unit} ({100.0 * self.n / self.total:.0f}%), {_duration(elapsed)}"
            if 0 < self.n < self.total:
                line += f", ~{_duration(elapsed * (self.total - self.n) / self.n)} left"
        else:
            line = f"{head}{self.n} {self.unit}, {_duration(elapsed)}"
        if self._postfix:
            line += f" [{self._postfix}]"
        print(line, file=self.file, flush=True)
        self._last = now
        self._printed_at = self.n

    def close(self) -> None:
        if self.disable or self._closed:
            return
        if self._printed_at != self.n:  # the final count, once
            self._print(self._clock())
        self._closed = True

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def progress_bar(total: int | None, desc: str = "", unit: str = "it", *, enabled: bool | None = None,
                 file: TextIO | None = None, every_pct: float = 10.0, every_s: float = 30.0, **tqdm_kw: Any):
    """A tqdm bar on a terminal, :class:`LineProgress` elsewhere; nothing with ``enabled=False``.

    ``enabled=None`` (the default) and ``True`` both show progress: a bar on a terminal, lines when
    ``file`` (default stderr) is not one. ``tqdm_kw`` go to tqdm only."""
    stream = file if file is not None else sys.stderr
    if enabled is False:
        return LineProgress(total, desc, unit, file=stream, disable=True)
    if _isatty(stream):
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit=unit, file=stream, **tqdm_kw)
    return LineProgress(total, desc, unit, file=stream, every_pct=every_pct, every_s=every_s)
