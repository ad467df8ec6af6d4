"""Run report: one self-contained report.html (plots embedded) that answers "did this run work, and why not?".

Reads only the run directory (metrics.jsonl, health.jsonl, eval.json, samples.jsonl, summary.json,
config.yaml), so it works on a finished run, a running one and a crashed one alike. The plots are also
written as PNGs under ``plots/``.
"""

from __future__ import annotations

import base64
import html
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from grpo_fast import rundir

REPORT_FILE = rundir.REPORT_FILE
PLOTS_DIR = "plots"
EMA_ALPHA = 0.3


@dataclass(frozen=True)
class PlotSpec:
    """One figure: which metrics, how to label it, and a health threshold to draw (if any)."""

    name: str
    title: str
    ylabel: str
    keys: tuple[str, ...]
    threshold: float | None = None
    threshold_label: str = ""


def _plot_specs(metrics: list[dict]) -> list[PlotSpec]:
    per_reward = tuple(sorted({k for m in metrics for k in m if k.startswith("rewards/") and k.endswith("/mean")}))
    return [
        PlotSpec("rewards", "Reward: total and per reward function", "mean reward per completion",
                 ("reward",) + per_reward),
        PlotSpec("reward_std", "Reward spread (GRPO learns only from differences)", "std of reward (reward units)",
                 ("reward_std",), 0.1, "default health alarm below 0.1"),
        PlotSpec("zero_std", "Groups with identical rewards (no learning signal)", "fraction of groups (0-1)",
                 ("frac_reward_zero_std",), 0.8, "default health alarm above 0.8"),
        PlotSpec("kl", "KL divergence from the reference model", "KL (nats per token)", ("kl",), 0.5,
                 "default health alarm above 0.5"),
        PlotSpec("entropy", "Token entropy of the policy", "entropy (nats per token)", ("entropy",), 0.05,
                 "default health alarm below 0.05"),
        PlotSpec("length", "Completion length", "tokens per completion",
                 ("completions/mean_length", "completions/mean_terminated_length")),
        PlotSpec("clipped", "Completions cut at max_completion_length", "fraction of completions (0-1)",
                 ("completions/clipped_ratio",), 0.5, "default health alarm above 0.5"),
    ]


def smooth(values: list[float | None], alpha: float = EMA_ALPHA) -> list[float | None]:
    """Exponential moving average that skips missing values (drawn beside the raw curve)."""
    out, ema = [], None
    for v in values:
        if v is not None:
            ema = v if ema is None else alpha * v + (1 - alpha) * ema
        out.append(ema)
    return out


def _label(key: str) -> str:
    if key == "reward":
        return "total (weighted sum)"
    if key.startswith("rewards/"):
        return key.split("/")[1]
    return key.split("/")[-1].replace("_", " ")


def plot_rewards(metrics: list[dict], path: Path, title: str, reward_max: float | None = None) -> None:
    """Total and per-reward mean reward per step, raw and smoothed, as a PNG (the report's renderer)."""
    keys = ("reward", *sorted({k for m in metrics for k in m if k.startswith("rewards/") and k.endswith("/mean")}))
    png = render_plot(PlotSpec("rewards", title, "mean reward per completion", keys), metrics, reward_max=reward_max)
    if png:
        rundir.atomic_write(path, png)


def render_plot(spec: PlotSpec, metrics: list[dict], events: list[dict] = (),
                reward_max: float | None = None) -> bytes | None:
    """The PNG of one figure, or None when no step logged any of its metrics."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rows = [m for m in metrics if "step" in m]
    keys = [k for k in spec.keys if any(isinstance(m.get(k), (int, float)) for m in rows)]
    if not keys:
        return None
    steps = [m["step"] for m in rows]
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=100)
    for key in keys:
        values = [m.get(key) if isinstance(m.get(key), (int, float)) else None for m in rows]
        raw = [float("nan") if v is None else v for v in values]
        total = key == "reward" and len(keys) > 1  # black and wider, so it shows even under an equal part
        (line,) = ax.plot(steps, raw, alpha=0.3, linewidth=1, marker="." if len(steps) < 30 else None,
                          **({"color": "black"} if total else {}))
        ax.plot(steps, [float("nan") if v is None else v for v in smooth(values)], color=line.get_color(),
                linewidth=4 if total else 2.2, label=f"{_label(key)}", zorder=1 if total else 2)
    if spec.threshold is not None:
        ax.axhline(spec.threshold, color="#c0392b", linestyle="--", linewidth=1, label=spec.threshold_label)
    if spec.name == "rewards" and reward_max is not None:
        ax.axhline(reward_max, color="#2c3e50", linestyle="-.", linewidth=1, label=f"maximum total {reward_max:g}")
        ax.set_ylim(top=reward_max * 1.05 if reward_max > 0 else None)
    if spec.name == "rewards":
        for i, step in enumerate(sorted({e["step"] for e in events if "step" in e})):
            ax.axvline(step, color="#c0392b", linestyle=":", linewidth=1, alpha=0.7,
                       label="health event" if i == 0 else None)
    ax.set_title(spec.title, fontsize=11)
    ax.set_xlabel("training step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(spec.ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best", title=f"thick: smoothed (EMA {EMA_ALPHA}); faint: raw", title_fontsize=7)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


# --------------------------------------------------------------------------- HTML


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _e(value: Any) -> str:
    """HTML-escaped text; control characters (random models emit NUL) shown as \\xNN, never raw."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", "" if value is None else str(value))
    return html.escape(text, quote=True)


def _num(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _e(value)
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _table(headers: list[str], rows: list[list[str]], cls: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.5em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em} td,th{border:1px solid #ddd;padding:.3em .6em;
vertical-align:top;text-align:left} th{background:#f4f4f4}
.status{display:inline-block;padding:.2em .6em;border-radius:4px;font-weight:600}
.finished{background:#d5f5e3} .unfinished{background:#fdebd0}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(480px,1fr));gap:1em} .plots img{width:100%}
pre{white-space:pre-wrap;word-break:break-word;background:#f8f8f8;padding:.5em;margin:0;max-height:20em;overflow:auto}
.up{color:#1e8449} .down{color:#c0392b} .muted{color:#777}
"""


def _status(run_dir: Path, summary: dict | None, metrics: list[dict], events: list[dict]) -> str:
    stopped = [e for e in events if e.get("action") == "stop"]
    if summary is not None:
        text = "finished"
        if stopped:
            text += f" (stopped early by the health monitor: {stopped[0].get('kind')} at step {stopped[0].get('step')})"
        return f'<span class="status finished">{_e(text)}</span>'
    last = metrics[-1]["step"] if metrics else 0
    return (f'<span class="status unfinished">unfinished</span> <span class="muted">no summary.json: the run is '
            f'still going, crashed or was interrupted; last logged step {last}</span>')


def _eval_section(evaluation: dict | None) -> str:
    if not evaluation:
        return '<p class="muted">No eval.json yet: run the evaluation (grpo_fast.evaluate.evaluate_run).</p>'
    rows = []
    for row in evaluation.get("comparison", []):
        delta = row.get("delta", 0) or 0
        better = delta < 0 if row["metric"] in ("mean_length", "clipped") else delta > 0
        cls = "" if abs(delta) < 1e-12 or row["metric"] == "mean_length" else ("up" if better else "down")
        rows.append([_e(row["metric"]), _num(row["base"]), _num(row["trained"]),
                     f'<span class="{cls}">{delta:+.3f}</span>'])
    settings = ", ".join(f"{_e(k)}={_e(v)}" for k, v in evaluation.get("settings", {}).items())
    n_rows = evaluation.get("trained", {}).get("rows", "?")
    out = f"<p>{_e(n_rows)} held-out rows; {settings}</p>" + _table(["metric", "base", "trained", "delta"], rows)
    examples = evaluation.get("trained", {}).get("examples") or []
    if examples:
        out += "<h3>Trained model, greedy answers</h3>" + _table(
            ["prompt", "completion", "correct"],
            [[f"<pre>{_e(x.get('prompt'))}</pre>", f"<pre>{_e(x.get('completion'))}</pre>", _e(x.get("correct"))]
             for x in examples])
    return out


def write_report(run_dir: str | Path, *, max_samples: int = 12) -> Path:
    """Write ``report.html`` and ``plots/*.png`` for a run directory (finished or not); return the HTML path."""
    run = rundir.Run.open(run_dir)
    run_dir = run.path
    metrics = rundir.read_jsonl(run_dir / "metrics.jsonl")
    events = rundir.read_jsonl(run_dir / "health.jsonl")
    samples = rundir.read_jsonl(run_dir / "samples.jsonl")
    summary, evaluation, config = run.summary, run.evaluation, run.config

    images = []
    for spec in _plot_specs(metrics):
        png = render_plot(spec, metrics, events)
        if png is None:
            continue
        rundir.atomic_write(run_dir / PLOTS_DIR / f"{spec.name}.png", png)
        data = base64.b64encode(png).decode("ascii")
        images.append(f'<img alt="{_e(spec.title)}" src="data:image/png;base64,{data}">')

    title = f"grpo_fast run {run_dir.name}"
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>",
             f"<p>{_status(run_dir, summary, metrics, events)}</p>"]
    facts = [["recipe", _e(config.get("recipe"))], ["model", _e(config.get("model"))],
             ["logged steps", _e(len(metrics))]]
    if summary:
        facts += [[_e(k), _num(v)] for k, v in summary.items() if k != "run_dir" and not isinstance(v, (dict, list))]
    parts.append(_table(["", ""], facts))

    parts.append("<h2>Training curves</h2>")
    parts.append(f'<div class="plots">{"".join(images)}</div>' if images
                 else '<p class="muted">No metrics logged yet.</p>')

    parts.append(f"<h2>Health events ({len(events)})</h2>")
    if events:
        parts.append(_table(["step", "alarm", "what was seen", "remedy", "action"],
                            [[_e(e.get("step")), _e(e.get("kind")), _e(e.get("message")), _e(e.get("remedy")),
                              _e(e.get("action"))] for e in events]))
    else:
        parts.append('<p class="muted">None: no health alarm was raised (see docs/health.md).</p>')

    failures = rundir.read_jsonl(run_dir / "reward_failures.jsonl")
    if failures:
        counts: dict[str, int] = {}
        for f in failures:
            counts[str(f.get("reward"))] = counts.get(str(f.get("reward")), 0) + 1
        parts.append(f"<h2>Reward failures ({len(failures)})</h2><p>"
                     + ", ".join(f"{_e(k)}: {v}" for k, v in counts.items())
                     + " samples scored None because the reward raised or returned NaN (last 5 below).</p>")
        parts.append(_table(["step", "reward", "error", "completion"], [
            [_e(f.get("step")), _e(f.get("reward")), _e(f.get("error")), f"<pre>{_e(f.get('completion'))}</pre>"]
            for f in failures[-5:]]))

    parts.append("<h2>Before / after evaluation</h2>" + _eval_section(evaluation))

    shown = samples[-max_samples:]
    parts.append(f"<h2>Sample completions (last {len(shown)} of {len(samples)})</h2>")
    if shown:
        parts.append(_table(["step", "prompt (end)", "completion", "rewards"], [
            [_e(s.get("step")), f"<pre>{_e(s.get('prompt'))}</pre>", f"<pre>{_e(s.get('completion'))}</pre>",
             "<br>".join(f"{_e(k)}: {_num(v)}" for k, v in (s.get("rewards") or {}).items())] for s in shown]))
    else:
        parts.append('<p class="muted">No samples logged yet.</p>')

    if config:
        parts.append("<h2>Configuration</h2><details><summary>config.yaml</summary><pre>"
                     + _e(yaml.safe_dump(config, sort_keys=False, allow_unicode=True)) + "</pre></details>")
    parts.append("</body></html>\n")
    path = run_dir / REPORT_FILE
    rundir.atomic_write(path, "".join(parts))
    return path
