"""Progress of long calls on stderr (``verbose=`` and the command line's ``--progress``).

A tqdm bar when tqdm is installed (the optional extra ``aloocv[progress]``); without
tqdm, or where a bar would garble a log (the command line with stderr not a terminal),
plain lines: one every :data:`PLAIN_INTERVAL` seconds and one when the call ends.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

__all__ = [
    "PLAIN_INTERVAL",
    "PROGRESS_STYLES",
    "Progress",
    "ProgressOptions",
    "has_tqdm",
    "progress_options",
]

#: Seconds between two plain progress lines.
PLAIN_INTERVAL = 10.0
#: ``"auto"``: tqdm when installed, plain lines otherwise; ``"bar"``: tqdm (ImportError
#: without it); ``"plain"``: plain lines.
PROGRESS_STYLES = ("auto", "bar", "plain")


@dataclass(frozen=True)
class ProgressOptions:
    """How the :class:`Progress` of the calls inside a :func:`progress_options` block
    show: ``style`` and ``delay`` as :class:`Progress` takes them, ``prefix`` before
    every description (the command line's "lambda 0.1: ")."""

    style: str = "auto"
    delay: float = 0.0
    prefix: str = ""


_OPTIONS: contextvars.ContextVar[ProgressOptions | None] = contextvars.ContextVar(
    "aloocv_progress", default=None
)


@contextlib.contextmanager
def progress_options(**kw: Any) -> Iterator[ProgressOptions]:
    """Set :class:`ProgressOptions` for the progress of the calls inside the block (the
    command line shows the progress of ``aloocv.loo`` as its own)."""
    opts = ProgressOptions(**kw)
    token = _OPTIONS.set(opts)
    try:
        yield opts
    finally:
        _OPTIONS.reset(token)


def _tqdm() -> Any:
    """tqdm's class (``tqdm.auto``'s: a notebook widget where one runs), or None."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


def has_tqdm() -> bool:
    """Whether tqdm is installed (a bar can be shown)."""
    return _tqdm() is not None


class Progress:
    """Progress of ``total`` steps of one call, shown on ``file`` (stderr by default).

    Parameters
    ----------
    total : int
        Steps of the call (refits, grid points, estimates).
    desc : str
        What runs (the start of every line, the bar's description).
    unit : str
        What a step is, singular (``"refit"``).
    style : {"auto", "bar", "plain"}, optional
        See :data:`PROGRESS_STYLES` (default: the :func:`progress_options` in force,
        ``"auto"`` outside any).
    delay : float, optional
        Nothing is shown before this many seconds (short calls show nothing; default:
        the :func:`progress_options` in force, 0 outside any).
    file : text stream, optional

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> with Progress(4, "exact leave-one-out", unit="refit", style="plain", file=out) as p:
    ...     p.update(4)
    >>> out.getvalue().startswith("exact leave-one-out: 4/4 refits (100%)")
    True
    """

    def __init__(
        self,
        total: int,
        desc: str,
        *,
        unit: str = "step",
        style: str | None = None,
        delay: float | None = None,
        file: TextIO | None = None,
    ):
        opts = _OPTIONS.get() or ProgressOptions()
        style = opts.style if style is None else style
        delay = opts.delay if delay is None else delay
        desc = opts.prefix + desc
        if style not in PROGRESS_STYLES:
            raise ValueError(f"style must be one of {PROGRESS_STYLES}, got {style!r}")
        self.total = int(total)
        self.desc = desc
        self.unit = unit
        self.delay = float(delay)
        self.file = file
        self.done = 0
        self._start = time.perf_counter()
        self._last: float | None = None  # when the last plain line was printed
        self._bar = None
        self._closed = False
        tqdm = None if style == "plain" else _tqdm()
        if tqdm is None and style == "bar":
            raise ImportError("a progress bar needs tqdm: pip install tqdm")
        if tqdm is not None:
            kw = dict(total=self.total, desc=desc, unit=unit, leave=False, file=self._stream())
            try:
                self._bar = tqdm(**kw, delay=self.delay)
            except TypeError:  # tqdm < 4.60 has no delay
                self._bar = tqdm(**kw)

    def _stream(self) -> TextIO:
        return sys.stderr if self.file is None else self.file

    def _line(self, final: bool) -> str:
        elapsed = time.perf_counter() - self._start
        plural = "" if self.total == 1 else "s"
        pct = 100.0 * self.done / self.total if self.total else 100.0
        text = f"{self.desc}: {self.done}/{self.total} {self.unit}{plural} ({pct:.0f}%)"
        if final:
            return f"{text} in {elapsed:.1f} s"
        left = elapsed * (self.total - self.done) / self.done if self.done else float("nan")
        return f"{text}, {elapsed:.0f} s elapsed, about {left:.0f} s left"

    def _print(self, final: bool) -> None:
        print(self._line(final), file=self._stream(), flush=True)
        self._last = time.perf_counter()

    def update(self, n: int = 1) -> None:
        """``n`` more steps done."""
        self.done += int(n)
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.perf_counter()
        since = now - (self._start if self._last is None else self._last)
        if now - self._start >= self.delay and since >= PLAIN_INTERVAL and self.done < self.total:
            self._print(False)

    def set_description(self, desc: str) -> None:
        self.desc = desc
        if self._bar is not None:
            self._bar.set_description(desc)

    def clear(self) -> None:
        """Take the bar off the terminal before other output (see :meth:`refresh`)."""
        if self._bar is not None:
            self._bar.clear()

    def refresh(self) -> None:
        if self._bar is not None:
            self._bar.refresh()

    def close(self) -> None:
        """End: the bar goes; plain lines end with one saying how long it took (when
        the call outlasted ``delay``)."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif self._last is not None or time.perf_counter() - self._start >= self.delay:
            self._print(True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
