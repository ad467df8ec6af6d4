"""Regenerate docs/benchmarks.md's "The demo" tables, docs/demo_reward_curve.png and docs/report_first_screen.png
(the first seed's report.html in headless chromium, 1280x800) from bench_demo.py's results.

Every figure comes from the runs' own artifacts (eval.json, summary.json, metrics.jsonl) via the results file;
nothing is typed by hand. The text between the two `demo-figures` markers of docs/benchmarks.md is replaced.

    .venv/bin/python benchmarks/demo_readme.py [--results runs/bench_demo.json [more.json ...]] \
        [--doc docs/benchmarks.md]

One table per results file (one per CPU class), each under the machine it was measured on; the figure and the
report screenshot come from the first.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
from pathlib import Path

BEGIN, END = "<!-- demo-figures:begin (benchmarks/demo_readme.py) -->", "<!-- demo-figures:end -->"
IMAGE, SCREEN = "demo_reward_curve.png", "report_first_screen.png"  # beside the page that shows them


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (Linux), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def read_metrics(run_dir: str) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def plot(results: list[dict], path: Path) -> None:
    """Per seed: total reward per step (smoothed) and held-out greedy accuracy before (step 0) and after."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from grpo_fast.watch.plots import smooth

    fig, reward_ax = plt.subplots(figsize=(8, 4.2))
    acc_ax = reward_ax.twinx()
    for i, r in enumerate(results):
        color = f"C{i}"
        metrics = [m for m in read_metrics(r["run_dir"]) if m.get("reward") is not None]
        steps = [m["step"] for m in metrics]
        rewards = [m["reward"] for m in metrics]
        reward_ax.plot(steps, rewards, color=color, alpha=0.2, linewidth=1)
        reward_ax.plot(steps, smooth(rewards), color=color, linewidth=2, label=f"seed {r['seed']}: reward (smoothed)")
        acc_ax.plot([0, r["steps"]], [r["base_accuracy"], r["trained_accuracy"]], color=color, linestyle="--",
                    marker="o", markersize=7)
        acc_ax.annotate(f"{r['trained_accuracy']:.0%}", (r["steps"], r["trained_accuracy"]), color=color,
                        textcoords="offset points", xytext=(6, -4 + 12 * (i - 1)), fontsize=9)
        acc_ax.annotate(f"{r['base_accuracy']:.0%}", (0, r["base_accuracy"]), color=color,
                        textcoords="offset points", xytext=(-34, -4 + 12 * (i - 1)), fontsize=9)
    reward_ax.set_xlabel("training step")
    reward_ax.set_ylabel(f"mean total reward (max {results[0].get('reward_max', 3.0):g})")
    acc_ax.set_ylabel("held-out greedy accuracy (dashed: base -> trained)")
    acc_ax.set_ylim(-0.02, 1.02)
    reward_ax.set_ylim(bottom=0)
    reward_ax.legend(loc="upper left", fontsize=8)
    reward_ax.set_title("grpo_fast demo: reward per step, held-out accuracy before and after")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def screenshot(report: Path, path: Path) -> bool:
    """The report's first screen as a 1280x800 browser shows it; False where chromium/chromedriver are missing."""
    import shutil

    chromium, driver = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
    if not (chromium and driver and report.exists()):
        return False
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800"):
        options.add_argument(arg)
    browser = webdriver.Chrome(options=options, service=Service(driver))
    try:
        browser.get(report.resolve().as_uri())
        path.parent.mkdir(parents=True, exist_ok=True)
        return browser.save_screenshot(str(path))
    finally:
        browser.quit()


def where(data: dict) -> str:
    """The machine a results file was measured on, in words and as torch saw its CPU."""
    m = data.get("machine") or {}
    words = m.get("described") or cpu_name()
    limits = f", restricted by {m['limits']}" if m.get("limits") else ""
    cpu = f" (torch saw: {m['cpu']}{limits})" if m.get("cpu") else ""
    return f"{words}{cpu}, {data['cpus']} cores"


def chosen(results: list[dict]) -> str:
    """What the cpu profile's auto chose in the first run, as its log printed it."""
    record = results[0].get("cpu_choices") or {}
    lines = [c["line"] for c in record.get("choices", [])]
    return ("The `cpu` profile chose: " + "; ".join(lines) + ".") if lines else ""


def table(data: dict, torch_version: str) -> list[str]:
    results = data["results"]
    rises = [r["rise"] for r in results]
    rows = [
        f"| {r['seed']} | {r['base_accuracy']:.0%} → **{r['trained_accuracy']:.0%}** ({r['rise'] * 100:+.0f} pts) "
        f"| {r['base_format']:.0%} → {r['trained_format']:.0%} | {r['train_s']:.0f} s ({r['steps']} steps) "
        f"| {r['command_s'] / 60:.1f} min | {r['load_before']:.1f} → {r['load_after']:.1f} |"
        for r in results
    ]
    held = results[0]["rows"]
    return [
        f"Measured by `benchmarks/bench_demo.py` on {data['finished']}: {where(data)} "
        f"(load average in the last column: a run alone reads about 2), torch {torch_version} CPU. Each seed is one "
        f"`grpo-fast train demo seed=S`; accuracy is greedy, on {held} held-out questions no training question "
        "shares. " + chosen(results),
        "",
        "| seed | held-out accuracy, base → trained | format, base → trained | training | whole command "
        "| load avg |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        f"Accuracy rise: mean {statistics.mean(rises) * 100:+.0f} points, minimum {min(rises) * 100:+.0f} points. "
        "The whole command includes model loading, checks, both evaluations and the report.",
        "",
    ]


def section(datas: list[dict], torch_version: str, shot: bool) -> str:
    results = datas[0]["results"]
    return "\n".join([
        BEGIN,
        *[line for data in datas for line in table(data, torch_version)],
        f"![reward curve and held-out accuracy]({IMAGE})",
        *([f"\nThe first screen of seed {results[0]['seed']}'s `report.html`: ![report]({SCREEN})"]
          if shot else []),
        END,
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", nargs="+", default=["runs/bench_demo.json"])
    parser.add_argument("--doc", default="docs/benchmarks.md", help="the page whose demo-figures block is replaced")
    args = parser.parse_args()
    import torch

    datas = [json.loads(Path(path).read_text()) for path in args.results]
    doc = Path(args.doc)
    plot(datas[0]["results"], doc.parent / IMAGE)
    shot = screenshot(Path(datas[0]["results"][0]["run_dir"]) / "report.html", doc.parent / SCREEN)
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc} has no {BEGIN} ... {END} block to replace")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(head + section(datas, torch.__version__.split("+")[0], shot) + tail)
    print(f"updated {doc}, {doc.parent / IMAGE}" + (f" and {doc.parent / SCREEN}" if shot else
                                                          " (no chromium: no report screenshot)"))


if __name__ == "__main__":
    main()
