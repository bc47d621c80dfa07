"""How long splitting a followed log's chunks into lines takes: the front-of-buffer split the
controller used before issue 29 (one copy of the rest of the buffer per line) against
k8s/client.py's LineSplitter (each chunk split once). Prints seconds per chunk size; no cluster.

    .venv/bin/python benchmarks/line_split.py
"""

from __future__ import annotations

import time

from airflow_t9k.k8s.client import LineSplitter


def old(chunk: bytes, max_line: int = 1 << 16) -> int:
    buffer, skipping, n = b"", False, 0
    buffer += chunk
    while b"\n" in buffer:
        _line, buffer = buffer.split(b"\n", 1)
        if not skipping:
            n += 1
        skipping = False
    return n


def new(chunk: bytes, max_line: int = 1 << 16) -> int:
    return len(LineSplitter(max_line).feed(chunk))


def main() -> None:
    print(f"{'chunk':>10} {'lines':>8} {'old s':>8} {'new s':>8}")
    for lines in (1_000, 10_000, 50_000, 100_000):
        chunk = b"".join(b"step %06d loss 0.1234\n" % i for i in range(lines))
        timings = []
        for fn in (old, new):
            start = time.perf_counter()
            assert fn(chunk) == lines
            timings.append(time.perf_counter() - start)
        print(f"{len(chunk):>10} {lines:>8} {timings[0]:>8.3f} {timings[1]:>8.3f}")


if __name__ == "__main__":
    main()
