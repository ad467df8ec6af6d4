"""The run's figures: which curves the report draws, each as a PNG (raw and smoothed), with the health warnings
that belong to it marked; the report (``watch.report``) embeds them."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_fast import files
from grpo_fast.watch.remedies import NOTES

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


def plot_specs(metrics: list[dict]) -> list[PlotSpec]:
    per_reward = tuple(sorted({k for m in metrics for k in m if k.startswith("rewards/") and k.endswith("/mean")}))
    return [
        PlotSpec("rewards", "Reward: total and per reward function", "mean reward per completion",
                 ("reward",) + per_reward),
        PlotSpec("reward_std", "Reward spread (GRPO learns only from differences)", "std of reward (reward units)",
                 ("reward_std",)),
        PlotSpec("zero_std", "Groups with identical rewards (no learning signal)", "fraction of groups (0-1)",
                 ("frac_reward_zero_std",), 0.9, "alarm at 0.9 with the reward at its floor or flat"),
        PlotSpec("kl", "KL divergence from the reference model", "KL (nats per token)", ("kl",), 0.5,
                 "default health alarm above 0.5"),
        PlotSpec("entropy", "Token entropy of the policy", "entropy (nats per token)", ("entropy",), 0.05,
                 "floor 0.05: an alarm only if the reward did not rise"),
        PlotSpec("length", "Completion length", "tokens per completion",
                 ("completions/mean_length", "completions/mean_terminated_length")),
        PlotSpec("clipped", "Completions cut at max_completion_length", "fraction of completions (0-1)",
                 ("completions/clipped_ratio",), 0.5, "default health alarm above 0.5"),
        PlotSpec("time", "Time per step: the whole step (generation, rewards, training) and the judge's part",
                 "seconds", ("step_time", "judge/seconds")),
    ]


def smooth(values: list[float | None], alpha: float = EMA_ALPHA) -> list[float | None]:
    """Exponential moving average that skips missing values (drawn beside the raw curve)."""
    out, ema = [], None
    for v in values:
        if v is not None:
            ema = v if ema is None else alpha * v + (1 - alpha) * ema
        out.append(ema)
    return out


CURVE_OF = {"low_reward_std": "reward_std", "zero_std_groups": "zero_std", "kl_high": "kl",
            "entropy_collapse": "entropy", "clipped": "clipped"}
"""The figure a health warning is drawn and explained next to; every other kind belongs to the reward curve."""


def is_note(event: dict) -> bool:
    """An informational health note (converged), not a warning; older runs wrote no "note" action."""
    return event.get("action") == "note" or event.get("kind") in NOTES


def warnings_on(curve: str, events: list[dict]) -> list[dict]:
    """The health warnings (not notes) that belong to one figure."""
    return [e for e in events if not is_note(e) and CURVE_OF.get(str(e.get("kind")), "rewards") == curve]


def _label(key: str) -> str:
    if key == "reward":
        return "total (weighted sum)"
    if key == "judge/seconds":
        return "judge"
    if key.startswith("rewards/"):
        return key.split("/")[1]
    return key.split("/")[-1].replace("_", " ")


def plot_rewards(metrics: list[dict], path: Path, title: str, reward_max: float | None = None) -> None:
    """Total and per-reward mean reward per step, raw and smoothed, as a PNG (the report's renderer)."""
    keys = ("reward", *sorted({k for m in metrics for k in m if k.startswith("rewards/") and k.endswith("/mean")}))
    png = render_plot(PlotSpec("rewards", title, "mean reward per completion", keys), metrics, reward_max=reward_max)
    if png:
        files.atomic_write(path, png)


def render_plot(spec: PlotSpec, metrics: list[dict], events: list[dict] = (),
                reward_max: float | None = None) -> bytes | None:
    """The PNG of one figure, or None when no step logged any of its metrics."""
    import matplotlib.pyplot as plt

    fig = figure(spec, metrics, events, reward_max)
    if fig is None:
        return None
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def figure(spec: PlotSpec, metrics: list[dict], events: list[dict] = (), reward_max: float | None = None) -> Any:
    """The matplotlib figure of one plot (the reward axis reaches the highest possible reward), or None."""
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
    for i, step in enumerate(sorted({e["step"] for e in warnings_on(spec.name, events) if "step" in e})):
        ax.axvline(step, color="#c0392b", linestyle=":", linewidth=1, alpha=0.7,
                   label="health warning" if i == 0 else None)
    ax.set_title(spec.title, fontsize=11)
    ax.set_xlabel("training step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(spec.ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best", title=f"thick: smoothed (EMA {EMA_ALPHA}); faint: raw", title_fontsize=7)
    fig.tight_layout()
    return fig
