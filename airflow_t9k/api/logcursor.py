"""Where a forwarded replica log stands, so that a reconnect resumes after exactly the lines sent.

A log read with ``timestamps=true`` stamps every line with the time the runtime wrote it. Stamps
are not unique: CRI-O stamps every line of one read buffer alike, and a burst of output often
shares its stamp elsewhere too. So a stream is never filtered by its stamps (every line of one
stream is forwarded), and the position is the last stamp *and how many lines carried it*. On a
reconnect the API server's ``sinceTime`` (whole seconds) replays from the start of that second;
``Resume`` skips the lines before the last stamp and exactly as many at it as were sent, then
forwards the rest, again without filtering.

Stamps are compared as instants (nanoseconds since the epoch), whatever their offset (``Z`` or
``+08:00``) and however many fraction digits they have, and ``sinceTime`` is sent in UTC. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:?\d{2})$")


def instant(stamp: str) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 stamp; None when it is not one."""
    m = _STAMP.match(stamp)
    if m is None:
        return None
    zone = m.group(3)
    if zone != "Z" and ":" not in zone:
        zone = f"{zone[:3]}:{zone[3:]}"
    try:
        when = datetime.fromisoformat(m.group(1) + ("+00:00" if zone == "Z" else zone))
    except ValueError:
        return None
    return int(when.timestamp()) * 1_000_000_000 + int((m.group(2) or "0").ljust(9, "0"))


def since_time(ns: int) -> str:
    """``sinceTime`` for the second holding ``ns``, in UTC (the API takes whole seconds)."""
    return datetime.fromtimestamp(ns // 1_000_000_000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def split(raw: str) -> tuple[str, str]:
    """(stamp, text) of a line read with ``timestamps=true``."""
    stamp, _, text = raw.rstrip("\n").partition(" ")
    return stamp, text


@dataclass
class Cursor:
    """The last stamp forwarded of one replica's log and how many forwarded lines carried it."""

    at: int | None = None  # nanoseconds since the epoch
    count: int = 0

    def sent(self, stamp: str) -> None:
        """A line with ``stamp`` was forwarded."""
        when = instant(stamp)
        if when is None:
            return
        if when == self.at:
            self.count += 1
        elif self.at is None or when > self.at:
            self.at, self.count = when, 1

    def since(self) -> str | None:
        return since_time(self.at) if self.at is not None else None

    def resume(self) -> Resume:
        return Resume(self.at, self.count)

    def as_dict(self) -> dict[str, Any]:
        return {"at": self.at, "count": self.count}

    @classmethod
    def from_dict(cls, value: Any) -> Cursor:
        if isinstance(value, dict) and isinstance(value.get("at"), int) and isinstance(value.get("count"), int):
            return cls(value["at"], max(value["count"], 0))
        return cls()


@dataclass
class Resume:
    """Skips, at the start of a reopened stream, the lines a cursor says were sent already."""

    at: int | None
    left: int  # lines at ``at`` still to skip
    done: bool = False

    def fresh(self, stamp: str) -> bool:
        """Whether the line with ``stamp`` is new (to forward); every line after the first new one is."""
        if self.done or self.at is None:
            self.done = True
            return True
        when = instant(stamp)
        if when is None:  # not a stamped line: nothing to compare; it belongs to what follows
            return False
        if when < self.at:
            return False
        if when == self.at and self.left > 0:
            self.left -= 1
            return False
        self.done = True
        return True


def unsent(lines: list[tuple[str, str]], cursor: Cursor | None, complete: bool) -> tuple[list[str], bool]:
    """Of a log's last lines, read as (stamp, text) since the cursor's second, the texts not sent
    yet, and whether that is certain. ``complete``: the read was not cut by its line limit, so it
    starts before or at the first line of the cursor's stamp.

    Lines at the cursor's stamp can be told apart only by their order from the first one; a read
    cut inside that run of lines (its first line at the cursor's stamp) cannot say how many of
    them it left out: the second value is then False, and the caller reads more."""
    if cursor is None or cursor.at is None:
        return [text for _, text in lines], True
    first = instant(lines[0][0]) if lines else None
    if not complete and first is not None and first == cursor.at:
        return [], False
    if not complete and first is not None and first > cursor.at:
        return [text for _, text in lines], True  # the run of the cursor's stamp ended before this read
    skip = cursor.resume()
    return [text for stamp, text in lines if skip.fresh(stamp)], True
