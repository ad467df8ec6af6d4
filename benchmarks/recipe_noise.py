"""The noise band of a held-out figure, and when a recipe run "learns" (benchmarks/bench_recipes.py).

Intervals are 95%, over the n held-out rows:

- a proportion (greedy accuracy, pass@k from k samples a row, pass@1 from one sample a row): the Wilson score
  interval of successes out of n. The successes are read back from the figure (a share of n rows is a whole
  number of rows); a figure that is not one (pass@1 estimated from several samples a row) is continuous.
- a continuous mean (ROUGE-L, fuzzy match, share of tests passed, pass@1 from several samples): a percentile
  bootstrap over rows of the per-row scores eval.json keeps (``per_row``); runs recorded before eval.json kept
  them have no interval ("unavailable").

"learns": the trained model's interval lies wholly above the base model's (the two 95% intervals do not
overlap). This is stricter than a paired test on the same rows (two non-overlapping 95% intervals mean a
difference at roughly p < 0.01), and it is the one rule that every recorded run allows: the runs recorded
before per-row scores were kept have only their proportions. Where both sides have per-row scores the paired
bootstrap interval of trained - base is recorded beside it, for information; it does not decide the verdict.
"""

from __future__ import annotations

import math
import random

Z95 = 1.959963984540054
RESAMPLES = 10000
PROPORTIONS = ("accuracy", "pass@1")  # and pass@k when the run drew k samples a row
WHOLE = 1e-6  # how far from a whole number of rows a proportion's share may be (float rounding)


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` out of ``n``."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"{successes} successes of {n}")
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap(values: list[float], resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval (95%) of the mean of ``values``, resampled by row."""
    if not values:
        raise ValueError("no values")
    rng, n = random.Random(seed), len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def paired_bootstrap(base: list[float], trained: list[float], resamples: int = RESAMPLES,
                     seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval (95%) of the mean per-row difference trained - base (the same rows)."""
    if len(base) != len(trained):
        raise ValueError(f"{len(base)} base rows against {len(trained)} trained rows")
    return bootstrap([t - b for b, t in zip(base, trained)], resamples, seed)


def samples_per_row(side: dict) -> int:
    """How many sampled answers a row the evaluation drew: its pass@k's k (1 when only pass@1 is there)."""
    ks = [int(key.split("@")[1]) for key in side if key.startswith("pass@") and key != "pass@1"]
    return max(ks, default=1)


def per_row(side: dict, metric: str) -> list[float] | None:
    """The per-row scores eval.json kept for ``metric`` (accuracy: the correct flags), None when it kept none."""
    rows = side.get("per_row") or {}
    values = rows.get("correct" if metric == "accuracy" else metric)
    return None if values is None else [float(v) for v in values]


def side_interval(side: dict, metric: str) -> tuple[list[float] | None, str]:
    """One side's interval for ``metric`` and how it was drawn (or why there is none)."""
    n, value = side.get("rows"), side.get(metric)
    if value is None or not n:
        return None, "unavailable: no figure"
    k = samples_per_row(side)
    if (metric in PROPORTIONS and not (metric == "pass@1" and k > 1)) or metric == f"pass@{k}":
        successes = value * n
        if abs(successes - round(successes)) < WHOLE:
            return [round(x, 4) for x in wilson(round(successes), n)], f"Wilson 95% over {n} rows"
    scores = per_row(side, metric)
    if scores is not None and len(scores) == n:
        return [round(x, 4) for x in bootstrap(scores)], f"bootstrap 95% over {n} rows ({RESAMPLES} resamples)"
    return None, "unavailable: a mean over rows and no per-row scores were recorded"


def intervals(record: dict, metrics: list[str]) -> dict:
    """For each metric: base and trained intervals, the method, the paired difference where per-row scores allow
    it, and the verdict (``verdict``)."""
    out = {}
    for metric in metrics:
        base, how_base = side_interval(record["base"], metric)
        trained, how_trained = side_interval(record["trained"], metric)
        entry = {"base": base, "trained": trained,
                 "method": how_base if how_base == how_trained else f"base: {how_base}; trained: {how_trained}"}
        pb, pt = per_row(record["base"], metric), per_row(record["trained"], metric)
        if pb is not None and pt is not None and len(pb) == len(pt):
            entry["paired_difference"] = [round(x, 4) for x in paired_bootstrap(pb, pt)]
        entry["verdict"] = verdict(base, trained)
        out[metric] = entry
    return out


def verdict(base: list[float] | None, trained: list[float] | None) -> str:
    """"learns" when the trained interval lies wholly above the base one, "falls" when wholly below, "within
    noise" when they overlap, "no interval" when either is unavailable."""
    if base is None or trained is None:
        return "no interval"
    if trained[0] > base[1]:
        return "learns"
    if trained[1] < base[0]:
        return "falls"
    return "within noise"


def said(record: dict, metric: str) -> str:
    """The figure as the docs say it: ``0.06 → 0.25 (+0.19, within noise)``."""
    a, b = record["base"].get(metric), record["trained"].get(metric)
    if a is None or b is None:
        return "–"
    word = record.get("intervals", {}).get(metric, {}).get("verdict", "no interval")
    return f"{a:.2f} → {b:.2f} ({b - a:+.2f}, {word})"
