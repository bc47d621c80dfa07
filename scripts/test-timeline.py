#!/usr/bin/env python3
"""Where a test run's wall time went, from .local-cluster/test-logs/timeline.jsonl (one line per
integration test, written by tests/conftest.py): each worker's busy time, how long the workers
sat idle at the end while the last ones finished, and the longest tests.

    scripts/test-timeline.py            # the latest run in the file
    scripts/test-timeline.py --top 40 --run RUN_ID
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

TIMELINE = Path(__file__).resolve().parents[1] / ".local-cluster" / "test-logs" / "timeline.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", help="the run id (default: the last run written)")
    parser.add_argument("--top", type=int, default=15, help="how many of the longest tests to list")
    parser.add_argument("--file", type=Path, default=TIMELINE)
    args = parser.parse_args()
    if not args.file.exists():
        print(f"[timeline] no {args.file}")
        return
    lines = [json.loads(line) for line in args.file.read_text().splitlines() if line.strip()]
    run = args.run or (lines[-1]["run"] if lines else None)
    tests = [t for t in lines if t["run"] == run]
    if not tests:
        print(f"[timeline] no test of run {run}")
        return
    start, end = min(t["start"] for t in tests), max(t["end"] for t in tests)
    by_worker: dict[str, list[dict]] = defaultdict(list)
    for t in tests:
        by_worker[t["worker"]].append(t)
    print(f"[timeline] {len(tests)} integration tests over {end - start:.0f}s on {len(by_worker)} worker(s)")
    for worker, mine in sorted(by_worker.items()):
        busy = sum(t["end"] - t["start"] for t in mine)
        last = max(t["end"] for t in mine)
        print(f"[timeline]   {worker}: {len(mine)} tests, busy {busy:.0f}s, done {end - last:.0f}s before the end")
    print("[timeline] the longest tests: wall seconds, worker, when it began, CPU-seconds of the worker and its ended children")
    for t in sorted(tests, key=lambda t: t["start"] - t["end"])[: args.top]:
        print(f"[timeline]   {t['end'] - t['start']:6.1f}s  {t['worker']:>5}  +{t['start'] - start:5.0f}s  "
              f"{t.get('cpu', 0):6.1f}cpu  {t['test']}")  # fmt: skip
    modules: dict[str, float] = defaultdict(float)
    for t in tests:
        modules[t["test"].split("::", 1)[0]] += t.get("cpu", 0)
    total = sum(modules.values())
    print(f"[timeline] CPU-seconds by module ({total:.0f} in all; the API server, etcd and kwok are not in it):")
    for module, cpu in sorted(modules.items(), key=lambda m: -m[1])[: args.top]:
        print(f"[timeline]   {cpu:7.1f}  {module}")


if __name__ == "__main__":
    main()
