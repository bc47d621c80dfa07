"""A picture of the chart's Grafana dashboard with a running controller's numbers, without a
Grafana or a Prometheus: scrape the controller's /metrics every few seconds for a while, then
draw every panel of deploy/chart/airflow-t9k/files/grafana-dashboard.json where it sits, each
query evaluated over the recorded scrapes (promql_lite.py) as Prometheus would, nearly.

    # a controller run by hand (its metrics on 127.0.0.1:8080), jobs running meanwhile
    .venv/bin/python benchmarks/dashboard_picture.py --url http://127.0.0.1:8080/metrics \\
        --duration 900 --record /tmp/dashboard.json --png docs/images/dashboard.png
    # the chart's two replicas, each port-forwarded, with a token allowed to read /metrics
    .venv/bin/python benchmarks/dashboard_picture.py --url https://127.0.0.1:18080/metrics \\
        --url https://127.0.0.1:18081/metrics --token-file /tmp/token --insecure --duration 900 \\
        --record /tmp/dashboard.json --png docs/images/dashboard.png
    # drawn again from a recording
    .venv/bin/python benchmarks/dashboard_picture.py --from /tmp/dashboard.json --png docs/images/dashboard.png

Each URL is a replica: its series get the labels a Prometheus Operator scrape adds (namespace,
job, pod; --label to set them) and an ``up`` of 1 for each scrape it answered, 0 otherwise.
Needs matplotlib (the 'bench' extra) to draw.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import ssl
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent))

from promql_lite import Evaluator, Labels, Scrape, Unsupported, Vector

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "chart" / "airflow-t9k" / "files" / "grafana-dashboard.json"
TARGET_LABELS = {"namespace": "airflow-t9k-system", "job": "airflow-t9k-controller-metrics"}
POINTS = 120  # per time series drawn
BG, PANEL, TEXT, GRID = "#111217", "#181b1f", "#ccccdc", "#2c3235"


# -- recording -----------------------------------------------------------------------------
def record(urls: list[str], interval: float, duration: float, token: str | None, insecure: bool) -> list[list[Any]]:
    """[[time, text or None], ...] per URL: what each scrape returned (None: no answer)."""
    context = ssl.create_default_context()
    if insecure:
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    out: list[list[Any]] = [[] for _ in urls]
    end = time.monotonic() + duration
    while True:
        for i, url in enumerate(urls):
            try:
                with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5, context=context) as r:
                    out[i].append([time.time(), r.read().decode()])
            except OSError as exc:
                print(f"{url}: {exc}", file=sys.stderr)
                out[i].append([time.time(), None])
        left = end - time.monotonic()
        if left <= 0:
            return out
        print(f"{len(out[0])} scrapes, {left:.0f}s left", file=sys.stderr, end="\r")
        time.sleep(min(interval, left))


def scrapes(raw: list[list[Any]], labels: dict[str, str]) -> list[Scrape]:
    """One target's recorded texts as samples by name, with its target labels and ``up``."""
    out: list[Scrape] = []
    for when, text in raw:
        samples: dict[str, list[tuple[Labels, float]]] = {}
        for family in text_string_to_metric_families(text or ""):
            for s in family.samples:
                key = tuple(sorted({**s.labels, **labels}.items()))
                samples.setdefault(s.name, []).append((key, float(s.value)))
        samples["up"] = [(tuple(sorted(labels.items())), 0.0 if text is None else 1.0)]
        out.append((float(when), samples))
    return out


# -- evaluating ----------------------------------------------------------------------------
def substitute(expr: str, rate_interval: float, span: float) -> str:
    """Grafana's variables: every template variable as All (.*), the intervals as durations."""
    expr = expr.replace("$__rate_interval", f"{rate_interval:.0f}s").replace("$__range", f"{span:.0f}s")
    return re.sub(r"\$\{?\w+\}?", ".*", expr)


def legend(fmt: str, labels: Labels, fallback: str) -> str:
    values = dict(labels)
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: values.get(m.group(1), ""), fmt or "").strip()
    return text or ", ".join(f"{k}={v}" for k, v in labels) or fallback


def series(ev: Evaluator, panel: dict[str, Any], times: list[float], rate_interval: float, span: float) -> dict[str, list[float]]:
    """Legend -> a value per time (NaN where the query had none), every target of the panel."""
    out: dict[str, list[float]] = {}
    for target in panel["targets"]:
        expr = substitute(target["expr"], rate_interval, span)
        for n, t in enumerate(times):
            value = ev.at(expr, t)
            vec: Vector = {(): value} if isinstance(value, float) else value
            for labels, v in vec.items():
                name = legend(target.get("legendFormat", ""), labels, target["refId"])
                out.setdefault(name, [math.nan] * len(times))[n] = v
    return out


def human(value: float, unit: str) -> str:
    if math.isnan(value):
        return "No data"
    if unit == "bytes":
        for size, suffix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if abs(value) >= size:
                return f"{value / size:.1f} {suffix}"
        return f"{value:.0f} B"
    if unit == "s":
        if abs(value) >= 3600:
            return f"{value / 3600:.3g} h"
        if abs(value) >= 60:
            return f"{value / 60:.3g} min"
        return f"{value:.2f} s" if value >= 0.01 or value == 0 else f"{value * 1000:.1f} ms"
    rate = " /s" if unit in ("ops", "reqps") else ""
    return f"{value:.3g}{rate}"


# -- drawing -------------------------------------------------------------------------------
def draw(dashboard: dict[str, Any], targets: list[list[Scrape]], png: Path, interval: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ev = Evaluator(targets)
    start = min(s[0][0] for s in targets if s)
    end = max(s[-1][0] for s in targets if s)
    rate_interval = max(4 * interval, 15.0)
    first = min(start + rate_interval, end)
    times = [first + (end - first) * i / (POINTS - 1) for i in range(POINTS)]
    panels = dashboard["panels"]
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    unit_h = 0.32  # inches per grid row; a column is 20/24 inches
    inches = height * unit_h + 0.8
    fig = plt.figure(figsize=(20, inches), facecolor=BG)
    fig.text(0.01, 1 - 0.25 / inches, f"{dashboard['title']}: {(end - start) / 60:.0f} minutes of a running controller "
             "(benchmarks/dashboard_picture.py)", color=TEXT, fontsize=13, va="top")  # fmt: skip
    top = 1 - 0.6 / inches

    def box(g: dict[str, int]) -> list[float]:
        return [g["x"] / 24 + 0.004, top - (g["y"] + g["h"]) / height * top + 0.006, g["w"] / 24 - 0.008,
                g["h"] / height * top - 0.012]  # fmt: skip

    for p in panels:
        g = p["gridPos"]
        if p["type"] == "row":
            fig.text(g["x"] / 24 + 0.004, top - (g["y"] + 0.5) / height * top, p["title"], color=TEXT, fontsize=12,
                     weight="bold", va="center")  # fmt: skip
            continue
        x, y, w, h = box(g)
        frame = fig.add_axes((x, y, w, h), facecolor=PANEL)
        frame.set_xticks([])
        frame.set_yticks([])
        for spine in frame.spines.values():
            spine.set_color(GRID)
        frame.text(0.01, 0.97, p["title"], color=TEXT, fontsize=9, va="top", transform=frame.transAxes)
        # The plot inside the panel, its tick labels too (a panel's neighbours sit right beside it).
        ax = fig.add_axes((x + 0.032, y + 0.022, w - 0.038, h - 0.022 - 0.35 / inches), facecolor="none")
        for spine in ax.spines.values():
            spine.set_visible(False)
        unit = p["fieldConfig"]["defaults"].get("unit", "short")
        try:
            if p["type"] == "stat":
                values = series(ev, p, [end], rate_interval, end - start)
                ax.set_axis_off()
                text = "\n".join(f"{human(v[0], unit)}" + (f"  {k}" if len(values) > 1 else "") for k, v in values.items())
                ax.text(0.5, 0.45, text or "No data", color="#73bf69", fontsize=16 if len(values) <= 1 else 10,
                        ha="center", va="center", transform=ax.transAxes)  # fmt: skip
                continue
            values = series(ev, p, times, rate_interval, end - start)
        except Unsupported as exc:
            ax.text(0.5, 0.5, f"not drawn: {exc}", color="#f2495c", ha="center", transform=ax.transAxes, fontsize=8)
            continue
        minutes = [(t - start) / 60 for t in times]
        if p["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"] == "normal" and values:
            names = sorted(values)
            ax.stackplot(minutes, [[0.0 if math.isnan(v) else v for v in values[k]] for k in names], labels=names, alpha=0.7)
        else:
            for name, ys in sorted(values.items()):
                ax.plot(minutes, ys, linewidth=1.2, label=name)
        ax.tick_params(colors=TEXT, labelsize=7)
        ax.grid(color=GRID, linewidth=0.5)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _pos, u=unit: human(v, u)))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _pos: f"{v:.0f} min"))
        for step in (p["fieldConfig"]["defaults"].get("thresholds") or {}).get("steps", [])[1:]:
            ax.axhline(step["value"], color=step["color"], linewidth=0.8, linestyle="--")
        if not values:
            ax.set_axis_off()
            ax.text(0.5, 0.5, "No data", color=TEXT, ha="center", va="center", transform=ax.transAxes)
        elif len(values) <= 8:
            ax.legend(fontsize=6, loc="upper left", facecolor=PANEL, edgecolor=GRID, labelcolor=TEXT)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=90, facecolor=BG)
    print(f"wrote {png}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", action="append", default=[], help="a replica's /metrics URL; repeat for each")
    parser.add_argument("--pod", action="append", default=[], help="the pod label of each --url (default replica-N)")
    parser.add_argument("--label", action="append", default=[], metavar="NAME=VALUE",
                        help="a target label for every URL (default namespace=airflow-t9k-system, "
                             "job=airflow-t9k-controller-metrics)")  # fmt: skip
    parser.add_argument("--token-file", help="a bearer token to send (the chart's /metrics asks for one)")
    parser.add_argument("--insecure", action="store_true", help="skip verifying the TLS certificate (self-signed)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between scrapes (default 5)")
    parser.add_argument("--duration", type=float, default=600.0, help="seconds to record (default 600)")
    parser.add_argument("--record", type=Path, help="keep the scrapes in this JSON file")
    parser.add_argument("--from", dest="source", type=Path, help="draw from a recording instead of scraping")
    parser.add_argument("--dashboard", type=Path, default=DASHBOARD)
    parser.add_argument("--png", type=Path, default=ROOT / "docs" / "images" / "dashboard.png")
    args = parser.parse_args()
    if args.source:
        saved = json.loads(args.source.read_text())
    elif args.url:
        token = Path(args.token_file).read_text().strip() if args.token_file else None
        raw = record(args.url, args.interval, args.duration, token, args.insecure)
        labels = {**TARGET_LABELS, **dict(kv.split("=", 1) for kv in args.label)}
        pods = args.pod + [f"replica-{i}" for i in range(len(args.pod), len(args.url))]
        per_url = [{"labels": {**labels, "pod": pod}, "scrapes": r} for pod, r in zip(pods, raw, strict=True)]
        saved = {"interval": args.interval, "targets": per_url}
        if args.record:
            args.record.write_text(json.dumps(saved))
    else:
        parser.error("give --url (to scrape) or --from (a recording)")
    targets = [scrapes(t["scrapes"], t["labels"]) for t in saved["targets"]]
    draw(json.loads(args.dashboard.read_text()), targets, args.png, float(saved["interval"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
