"""How good are the health alarms? Replays every recorded run of the corpus through the current monitor.

Prints, per run, the warnings (and notes) it raises and, for broken runs, whether a labelled kind fired and at
which step against the labelled one; then the totals: false alarms on healthy runs, broken runs caught with
the right kind in time, steps to detection, and what ``on_alarm: stop`` would do (healthy runs it would stop,
broken runs it would stop and when). Exit 1 when the goal (0 false alarms, every broken run caught in time)
is not met.

    .venv/bin/python benchmarks/health_eval.py [--only tuning|holdout] [threshold=value ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import grpo_fast
from grpo_fast.run.resolve import parse_overrides

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "watch" / "health_corpus"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["tuning", "holdout"], help="the runs used to tune, or those kept aside")
    parser.add_argument("thresholds", nargs="*", help="health threshold overrides, e.g. window=3")
    args = parser.parse_args()
    labels = json.loads((CORPUS / "labels.json").read_text())
    holdout = set(labels["holdout"])

    def chosen(name: str) -> bool:
        return (CORPUS / name / "metrics.jsonl").exists() and (
            args.only is None or (name in holdout) == (args.only == "holdout"))

    thresholds = parse_overrides(args.thresholds)
    healthy = [n for n in labels["healthy"] if chosen(n)]
    broken = {n: spec for n, spec in labels["broken"].items() if chosen(n)}
    missing = [n for n in [*labels["healthy"], *labels["broken"]] if not (CORPUS / n / "metrics.jsonl").exists()]

    independent = {n for n, p in labels.get("provenance", {}).items() if p.get("independent")}
    warned, hit = set(), set()  # runs with any warning; broken runs caught with a labelled kind in time
    print("healthy runs (no warning, no stop allowed):")
    false_alarms, stopped = 0, 0
    for name in healthy:
        warn = grpo_fast.health(CORPUS / name, **thresholds)
        if warn.warnings:
            warned.add(name)
        stop = grpo_fast.health(CORPUS / name, on_alarm="stop", **thresholds)
        false_alarms += bool(warn.warnings)
        stopped += stop.stopped_by is not None
        notes = [f"{e.kind}@{e.step}" for e in warn.events if e.is_note]
        print(f"  {name:22s} {warn.steps:3d} steps  warnings: "
              f"{', '.join(f'{e.kind}@{e.step}' for e in warn.warnings) or 'none'}"
              f"{'  notes: ' + ', '.join(notes) if notes else ''}"
              f"{f'  STOPPED at {stop.stopped_by.step}' if stop.stopped_by else ''}")

    print("\nbroken runs (a labelled kind by the labelled step):")
    caught, delays, stop_caught = 0, [], 0
    for name, spec in broken.items():
        warn = grpo_fast.health(CORPUS / name, **thresholds)
        stop = grpo_fast.health(CORPUS / name, on_alarm="stop", **thresholds)
        first = warn.first_step(spec["kinds"])
        ok = first is not None and first <= spec["by_step"]
        caught += ok
        warned |= {name} if warn.warnings else set()
        hit |= {name} if ok else set()
        if first is not None:
            delays.append(first)
        stop_ok = stop.stopped_by is not None and stop.stopped_by.step <= spec["by_step"]
        stop_caught += stop_ok
        kinds = sorted({e.kind for e in warn.warnings})
        print(f"  {name:22s} want {'/'.join(spec['kinds'])} by {spec['by_step']}: "
              f"{'caught at ' + str(first) if ok else ('LATE at ' + str(first) if first else 'MISSED')}  "
              f"(all kinds: {', '.join(kinds) or 'none'}; stop: "
              f"{f'{stop.stopped_by.kind}@{stop.stopped_by.step}' if stop.stopped_by else 'never'})")

    print(f"\nfalse alarms: {false_alarms} of {len(healthy)} healthy runs warned; on_alarm: stop would stop "
          f"{stopped} of them")
    print(f"caught: {caught} of {len(broken)} broken runs with a labelled kind in time; steps to detection: "
          + (", ".join(map(str, delays)) if delays else "-")
          + f"; on_alarm: stop stops {stop_caught} of {len(broken)} by the labelled step")
    every = set(healthy) | set(broken)
    for title, subset in (("all runs", every),
                          ("independent runs (no rule's author had seen them)", every & independent)):
        mine_broken, mine_warned = set(broken) & subset, warned & subset
        print(f"{title}: {len(subset)} ({len(mine_broken)} broken, {len(subset) - len(mine_broken)} healthy); "
              f"precision {ratio(len(mine_warned & set(broken)), len(mine_warned))} (warned runs that are broken), "
              f"recall {ratio(len(hit & subset), len(mine_broken))} (broken runs caught in time)")
    if missing:
        print(f"not recorded yet: {', '.join(missing)} (benchmarks/health_corpus.py)")
    return 0 if false_alarms == 0 and stopped == 0 and caught == len(broken) else 1


def ratio(a: int, b: int) -> str:
    return f"{a} of {b}" if b else "undefined (0 of 0)"


if __name__ == "__main__":
    sys.exit(main())
