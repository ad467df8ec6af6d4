"""The judge at its floor from a run's first steps: no completion of any group was right (pass@k over every group
is 0), so GRPO has no right answer to reinforce. The other rewards (format, length, style) still give the groups a
spread, so the spread rules stay quiet while the run trains for nothing its judge measures; this rule names it
once, at the start, with the fixes that work at small scale (tool_math went 0% -> 100% with an SFT warm-up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grpo_fast.watch.alarms import REMEDIES, HealthEvent

if TYPE_CHECKING:
    from grpo_fast.watch.alarms import Rules


def no_correct(rules: Rules, step: int) -> list[HealthEvent]:
    """At the run's ``window``-th logged step: the judge's per-step mean sat at its declared floor in every one of
    them (every completion of every group scored the floor). Judged once; a judge without a declared range, or
    one that scored anything, is left alone."""
    name, n = rules.scale.correctness_reward, rules.s.window
    if not name or len(rules.rows) != n:
        return []
    means, floor = rules.component(name), rules.scale.low_of(name)
    if floor is None or len(means) < n or max(means) > floor + 1e-9:
        return []
    message = (f"the judge '{name}' gave every completion of the first {n} steps its floor {floor:g}: no group "
               "held a right answer, so GRPO cannot reinforce correctness (the other rewards can still move)")
    return [HealthEvent(step, "no_correct", message, REMEDIES["no_correct"], max(means), floor)]
