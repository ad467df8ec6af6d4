"""Run report: one self-contained report.html (plots embedded) that answers "did this run work, and why not?".

Reads only the run directory (metrics.jsonl, health.jsonl, eval.json, samples.jsonl, summary.json,
config.yaml), so it works on a finished run, a running one and a crashed one alike. The plots (``watch.plots``)
are also written as PNGs under ``plots/``.
"""

from __future__ import annotations

import base64
import math
import statistics
from pathlib import Path
from typing import Any

import yaml

from grpo_fast import files, rundir
from grpo_fast.watch.completions import answers_html, completion_html
from grpo_fast.watch.completions import escape as _e
from grpo_fast.watch.plots import is_note, plot_specs, render_plot, warnings_on

REPORT_FILE = rundir.REPORT_FILE
PLOTS_DIR = "plots"
JUDGE_COUNTS = ("judged", "cached", "screened", "timeouts", "errors", "unparsable")


def _by_kind(events: list[dict]) -> list[list[dict]]:
    kinds = dict.fromkeys(str(e.get("kind")) for e in events)
    return [[e for e in events if str(e.get("kind")) == k] for k in kinds]


def _alarm_caption(group: list[dict]) -> str:
    """A warning under its curve: the first time it fired, what it saw, its remedy, and how often it came back."""
    first = group[0]
    again = (f" (raised {len(group)} times, last at step {_e(group[-1].get('step'))})" if len(group) > 1 else "")
    return (f'<p class="alarm"><b>HEALTH [{_e(first.get("kind"))}] step {_e(first.get("step"))}</b>: '
            f'{_e(first.get("message"))}{again}<br>remedy: {_e(first.get("remedy"))}</p>')


# --------------------------------------------------------------------------- HTML


def _num(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _e(value)
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _table(headers: list[str], rows: list[list[str]], cls: str = "") -> str:
    head = "<thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in headers) + "</tr></thead>" if headers else ""
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{cls}">{head}<tbody>{body}</tbody></table>'


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:1.2em auto;padding:0 1em;color:#222}
h1{font-size:1.4em;margin:.2em 0} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.4em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em} td,th{border:1px solid #ddd;padding:.3em .6em;
vertical-align:top;text-align:left} th{background:#f4f4f4}
.status{display:inline-block;padding:.15em .6em;border-radius:4px;font-weight:600}
.finished{background:#d5f5e3} .unfinished{background:#fdebd0}
.headline{border:2px solid #2c3e50;border-radius:8px;padding:.6em 1em;margin:.6em 0}
.verdict{font-size:1.15em;font-weight:600;margin:.2em 0 .4em} .better{color:#1e8449} .worse{color:#b03a2e}
.same{color:#7d6608} .up{color:#1e8449} .down{color:#b03a2e} .muted{color:#777}
pre{white-space:pre-wrap;margin:0;font-size:.85em;max-width:30em} .plots img{max-width:100%;display:block}
.facts td:first-child{color:#555} .alarm{color:#b03a2e;margin:.2em 0 .8em;font-size:.9em}
"""
# Metrics of the headline, in order; the recipe's own metric (eval.json "metric") leads.
HEADLINE = ("accuracy", "score", "format")
LABELS = {"accuracy": "accuracy (greedy)", "score": "mean score (share of full)", "format": "format compliance",
          "mean_length": "mean length (tokens)", "clipped": "cut at max length", "pass@1": "pass@1"}
# (key in config.yaml or summary.json, label, format)
FACTS = (("recipe", "recipe", "{}"), ("model", "base model", "{}"), ("steps", "training steps", "{}"),
         ("wall_s", "training time", "{:.0f} s"), ("s_per_step", "time per step", "{:.1f} s"),
         ("backend", "backend", "{}"), ("reward_first", "mean reward, first 5 steps", "{:.3f}"),
         ("reward_last", "mean reward, last 5 steps", "{:.3f}"), ("reward_max", "highest possible reward", "{:g}"))


def verdict(evaluation: dict) -> tuple[str, str]:
    """One line answering "did training help?": the headline metric's change against twice its standard error
    (a change inside the noise of a held-out set this size is called no clear change)."""
    rows = {r["metric"]: r for r in evaluation.get("comparison", [])}
    metric = evaluation.get("metric") or "accuracy"
    row = rows.get(metric) or rows.get("accuracy")
    if row is None:
        return "same", "No comparison in eval.json."
    n = max(1, int(evaluation.get("trained", {}).get("rows") or 1))
    p = min(max((row["base"] + row["trained"]) / 2, 1 / n), 1 - 1 / n)
    noise = 2 * math.sqrt(2 * p * (1 - p) / n)
    change = f"{LABELS.get(row['metric'], row['metric'])} {row['base']:.2f} -> {row['trained']:.2f} " \
             f"({row['delta'] * 100:+.0f} points) on {n} held-out rows"
    if row["delta"] > noise:
        return "better", f"Training helped: {change}."
    if row["delta"] < -noise:
        return "worse", f"Training made it worse: {change}."
    return "same", f"No clear change: {change}; the noise at this size is about +-{noise * 100:.0f} points."


def health_line(events: list[dict]) -> str:
    """The first screen's health sentence: warnings (each next to its curve below) or none; notes as notes."""
    warnings = [e for e in events if not is_note(e)]
    notes = [e for e in events if is_note(e)]
    line = (f"{len(warnings)} health warning(s): "
            + ", ".join(f"{k} (first at step {min(e['step'] for e in warnings if e.get('kind') == k)})"
                        for k in sorted({str(e.get('kind')) for e in warnings}))
            + "; each is shown with its remedy under its curve below") if warnings else "no health warning"
    for note in notes:
        line += f"; note: {note.get('kind')} at step {note.get('step')} ({note.get('remedy')})"
    return line


def _headline(evaluation: dict | None, events: list[dict]) -> str:
    alarms = health_line(events)
    if not evaluation:
        return (f'<section class="headline" id="headline"><div class="verdict same">Not evaluated yet: run '
                f'<code>grpo-fast eval</code> on this run directory.</div><p>{_e(alarms)}.</p></section>')
    cls, line = verdict(evaluation)
    rows = {r["metric"]: r for r in evaluation.get("comparison", [])}
    k = evaluation.get("settings", {}).get("k")
    order = [m for m in (evaluation.get("metric"), *HEADLINE, f"pass@{k}") if m in rows]
    table = _table(["held-out", "base model", "trained", "change"], [
        [_e(LABELS.get(m, m)), _num(rows[m]["base"]), _num(rows[m]["trained"]), _delta(m, rows[m]["delta"])]
        for m in dict.fromkeys(order)])
    return (f'<section class="headline" id="headline"><div class="verdict {cls}">{_e(line)}</div>{table}'
            f'<p>{_e(alarms)}.</p></section>')


def _delta(metric: str, delta: float) -> str:
    better = delta < 0 if metric in ("mean_length", "clipped") else delta > 0
    cls = "" if abs(delta) < 1e-12 or metric == "mean_length" else ("up" if better else "down")
    return f'<span class="{cls}">{delta:+.3f}</span>'


def _status(summary: dict | None, metrics: list[dict], events: list[dict]) -> str:
    stopped = [e for e in events if e.get("action") == "stop"]
    if summary is not None:
        text = "finished"
        if stopped:
            text += f" (stopped early by the health monitor: {stopped[0].get('kind')} at step {stopped[0].get('step')})"
        return f'<span class="status finished">{_e(text)}</span>'
    last = metrics[-1]["step"] if metrics else 0
    return (f'<span class="status unfinished">unfinished</span> <span class="muted">no summary.json: the run is '
            f'still going, crashed or was interrupted; last logged step {last}</span>')


def _facts(config: dict, summary: dict | None, metrics: list[dict]) -> str:
    known = {**config, **(summary or {})}
    rows = [[_e(label), _e(fmt.format(known[key]))] for key, label, fmt in FACTS if known.get(key) is not None]
    rows.append(["logged steps", _e(len(metrics))])
    for key in sorted({k for m in metrics for k in m if k.startswith("rewards/") and k.endswith("/not_applicable")}):
        shares = [m[key] for m in metrics if isinstance(m.get(key), (int, float))]
        if shares and max(shares) > 0:  # unparsable golds, rows without a reference: TRL skipped them
            rows.append([_e(f"{key.split('/')[1]}: not applicable (None)"),
                         _e(f"{sum(shares) / len(shares):.1%} of completions, mean over {len(shares)} steps")])
    return _table([], rows, "facts")


def _time_and_judges(summary: dict | None, metrics: list[dict]) -> str:
    """Time per step split into the judge's share (``judge/seconds``) and the rest (generation, the other rewards
    and training: TRL's ``step_time`` holds them all), and each judge's counts from summary.json."""
    rows = []
    steps = [m for m in metrics if isinstance(m.get("step_time"), (int, float))]
    judged = [m["judge/seconds"] for m in steps if isinstance(m.get("judge/seconds"), (int, float))]
    if steps and judged:
        step = statistics.fmean(m["step_time"] for m in steps)
        judge = statistics.fmean(judged)
        rows.append(["time per step (mean over logged steps)",
                     f"{step:.1f} s: judge {judge:.1f} s ({judge / step:.0%}), generation and training "
                     f"{max(0.0, step - judge):.1f} s"])
    for name, stats in ((summary or {}).get("judges") or {}).items():
        counts = ", ".join(f"{stats[k]} {k}" for k in JUDGE_COUNTS if stats.get(k))
        agreement = stats.get("self_test_agreement")
        rows.append([f"judge {name}", f"{stats.get('samples', 0)} samples in {stats.get('seconds', 0):.1f} s: "
                     f"{counts or 'none scored'}" + (f"; self-test agreement {agreement:.2f}"
                                                     if isinstance(agreement, (int, float)) else "")])
    return _table([], [[_e(a), _e(b)] for a, b in rows], "facts") if rows else ""


def _cpu_choices(summary: dict | None) -> str:
    """The speed-ups the run chose on its CPU, and why (summary.json's ``cpu_choices``); empty when none."""
    record = (summary or {}).get("cpu_choices") or {}
    lines = [c["line"] for c in record.get("choices", [])]
    if not lines:
        return ""
    head = f"<p class='muted'>speed-ups on {_e(record['cpu'])}</p>" if record.get("cpu") else ""
    return head + "<ul>" + "".join(f"<li>{_e(line)}</li>" for line in lines) + "</ul>"


def _sandbox(summary: dict | None) -> str:
    """The code sandbox's level and what a generated program could still reach (summary.json's ``sandbox``)."""
    record = (summary or {}).get("sandbox")
    if not record:
        return ""
    threats = record.get("threats") or []
    reach = "".join(f"<li>{_e(t)}</li>" for t in threats) or "<li>nothing known</li>"
    level = _e(record.get("level"))
    return f"<p>code sandbox: {level}; what a generated program could still reach:</p><ul>{reach}</ul>"


def write_report(run_dir: str | Path, *, max_samples: int = 12) -> Path:
    """Write ``report.html`` and ``plots/*.png`` for a run directory (finished or not); return the HTML path.

    First screen: did training help (held-out before -> after, a verdict, health alarms); then the run's facts,
    the curves (the reward axis up to the highest possible reward), the answers side by side and the details.
    """
    run = rundir.Run.open(rundir.path_of(run_dir))
    run_dir = run.path
    metrics = files.read_jsonl(run_dir / "metrics.jsonl")
    events = files.read_jsonl(run_dir / "health.jsonl")
    samples = files.read_jsonl(run_dir / "samples.jsonl")
    summary, evaluation, config = run.summary, run.evaluation, run.config
    reward_max = (summary or {}).get("reward_max")

    images = []
    for spec in plot_specs(metrics):
        png = render_plot(spec, metrics, events, reward_max=reward_max)
        if png is None:
            continue
        files.atomic_write(run_dir / PLOTS_DIR / f"{spec.name}.png", png)
        data = base64.b64encode(png).decode("ascii")
        caption = "".join(_alarm_caption(group) for group in _by_kind(warnings_on(spec.name, events)))
        images.append(f'<div class="curve"><img alt="{_e(spec.title)}" src="data:image/png;base64,{data}">'
                      f'{caption}</div>')

    title = f"grpo_fast run {run_dir.name}"
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>",
             f"<p>{_status(summary, metrics, events)}</p>", _headline(evaluation, events),
             "<h2>The run</h2>", _facts(config, summary, metrics), _time_and_judges(summary, metrics),
             _cpu_choices(summary), _sandbox(summary)]

    notes = sum(is_note(e) for e in events)
    parts.append(f"<h2>Health events ({len(events) - notes} warning(s), {notes} note(s))</h2>")
    if events:
        parts.append(_table(["step", "alarm", "what was seen", "remedy", "action"],
                            [[_e(e.get("step")), _e(e.get("kind")), _e(e.get("message")), _e(e.get("remedy")),
                              _e(e.get("action"))] for e in events]))
    else:
        parts.append('<p class="muted">None: no health warning or note was raised (see docs/health.md).</p>')

    parts.append("<h2>Training curves</h2>")
    parts.append(f'<div class="plots">{"".join(images)}</div>' if images
                 else '<p class="muted">No metrics logged yet.</p>')
    parts.append(answers_html(evaluation, _table))

    failures = files.read_jsonl(run_dir / "reward_failures.jsonl")
    if failures:
        counts: dict[str, int] = {}
        for f in failures:
            counts[str(f.get("reward"))] = counts.get(str(f.get("reward")), 0) + 1
        parts.append(f"<h2>Reward failures ({len(failures)})</h2><p>"
                     + ", ".join(f"{_e(k)}: {v}" for k, v in counts.items())
                     + " samples scored None because the reward raised or returned NaN (last 5 below).</p>")
        parts.append(_table(["step", "reward", "error", "completion"], [
            [_e(f.get("step")), _e(f.get("reward")), _e(f.get("error")), completion_html(f)]
            for f in failures[-5:]]))

    if evaluation:
        settings = ", ".join(f"{_e(k)}={_e(v)}" for k, v in evaluation.get("settings", {}).items())
        parts.append("<h2>Evaluation details</h2><p>" + settings + "</p>" + _table(
            ["metric", "base", "trained", "change"],
            [[_e(LABELS.get(r["metric"], r["metric"])), _num(r["base"]), _num(r["trained"]),
              _delta(r["metric"], r["delta"])] for r in evaluation.get("comparison", [])]))

    shown = samples[-max_samples:]
    parts.append(f"<h2>Training samples (last {len(shown)} of {len(samples)})</h2>")
    if shown:
        parts.append(_table(["step", "question", "completion", "rewards"], [
            [_e(s.get("step")), f"<pre>{_e(s.get('prompt'))}</pre>", completion_html(s),
             "<br>".join(f"{_e(k)}: {_num(v)}" for k, v in (s.get("rewards") or {}).items())] for s in shown]))
    else:
        parts.append('<p class="muted">No samples logged yet.</p>')

    if config:
        parts.append("<h2>Configuration</h2><details><summary>config.yaml</summary><pre>"
                     + _e(yaml.safe_dump(config, sort_keys=False, allow_unicode=True)) + "</pre></details>")
    parts.append("</body></html>\n")
    path = run_dir / REPORT_FILE
    files.atomic_write(path, "".join(parts))
    return path
