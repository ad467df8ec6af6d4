"""One-off audit (issue 52, part 6): when each health-corpus run, its label and the rules that judge it were written,
read back from git history, and each broken run's recorded outcome, read from its own files (train.log's held-out
line, metrics.jsonl's judge means): written into tests/watch/health_corpus/labels.json under "provenance" and
"outcome". Needs the repository's history; benchmarks/health_eval.py reads only labels.json.

    python benchmarks/health_provenance.py
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "watch" / "health_corpus"
# The commit where each alarm kind's rule last changed what it decides (moves and refactors left out: 1cfe1b7,
# 55c92f0, 855c9dc, 338e14e; 3368088 changed no_correct's remedy text only), and what that commit names.
RULES = {
    "kl_high": "ca3a03f", "nonfinite": "ca3a03f", "clipped": "ca3a03f", "reward_errors": "ca3a03f",
    "zero_std_groups": "c197f7a", "plateau": "c197f7a", "entropy_collapse": "154725a", "low_reward_std": "9fd6f5a",
    "reward_hacking": "940aaa6", "no_signal": "e44bd68", "thinking_open": "c435639", "no_correct": "08f58a8",
}
# Runs a rule's own commit describes: the rule was written with them (or their family) in view.
DESCRIBED = {
    "940aaa6": ("format-hacking",),  # "so a format gamed within the first ten steps counts": format-hacking's climb
    "9fd6f5a": ("summarization-short", "qa-short"),  # its message: summarization (held out) and qa-short
    "08f58a8": ("code-cpu-", "math-cpu-", "qa-cpu-", "summarization-cpu-"),  # names recipes/*_cpu.yaml, QA, ROUGE-L
}
RELABELLED = ("math-short", "code-short")  # "meant as healthy, relabelled after recording" to the rule's kind


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def first(args: list[str]) -> tuple[str, str] | None:
    out = git("log", "--reverse", "--format=%h %aI", *args).splitlines()
    return tuple(out[0].split()) if out else None


def outcome(name: str) -> dict:
    folder = CORPUS / name
    log = (folder / "train.log").read_text() if (folder / "train.log").exists() else ""
    held = re.search(r"held-out \((\d+) rows, base -> trained\): (.*)", log)
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "reward" in r]
    judges = sorted({k for r in rows for k in r if k.startswith("rewards/") and k.endswith("/mean")})
    out = {"heldout": f"{held.group(2)} ({held.group(1)} rows)" if held else None, "judge_means": {}}
    for key in judges:
        means = [r[key] for r in rows if isinstance(r.get(key), int | float)]
        if means:
            out["judge_means"][key.split("/")[1]] = {
                "first": round(means[0], 3), "last": round(means[-1], 3),
                "mean": round(statistics.fmean(means), 3), "steps": len(means),
                "steps_above_0": sum(m > 0 for m in means)}
    clipped = [r["completions/clipped_ratio"] for r in rows if "completions/clipped_ratio" in r]
    if clipped:
        out["clipped_ratio_mean"] = round(statistics.fmean(clipped), 3)
    return out


def main() -> int:
    path = CORPUS / "labels.json"
    labels = json.loads(path.read_text())
    when = {sha: git("log", "-1", "--format=%aI", sha) for sha in set(RULES.values())}
    kinds_all = sorted(RULES)
    for name in [*labels["healthy"], *labels["broken"]]:
        recorded = first(["--diff-filter=A", "--", f"*health_corpus/{name}/metrics.jsonl"])
        spec = labels["broken"].get(name)
        label = first(["-S", f'"{name}": {{"kinds"', "--", "*health_corpus/labels.json"]) if spec else \
            first(["-S", f'"{name}"', "--", "*health_corpus/labels.json"])
        kinds = spec["kinds"] if spec else kinds_all  # a healthy run: any rule could warn on it
        seen_by = sorted({RULES[k] for k in kinds if RULES[k] in DESCRIBED and name.startswith(DESCRIBED[RULES[k]])}
                         | {RULES[k] for k in kinds if when[RULES[k]] >= recorded[1]})
        reasons = []
        if seen_by:
            reasons.append("rule(s) " + ", ".join(f"{sha} ({when[sha][:16]})" for sha in seen_by)
                           + " last changed at or after the run was recorded, or name the run or its family")
        if name in RELABELLED:
            reasons.append("its label was changed after recording to the kind the rule raised on it")
        if label and label[1] > recorded[1]:
            reasons.append("its label was written after the run was recorded")
        labels.setdefault("provenance", {})[name] = {
            "run_recorded": f"{recorded[0]} {recorded[1][:16]}", "label_written": f"{label[0]} {label[1][:16]}",
            "rules": {k: f"{RULES[k]} {when[RULES[k]][:16]}" for k in (spec["kinds"] if spec else [])},
            "independent": not reasons, "why": "; ".join(reasons) or (
                "every rule that judges it was last changed before the run was recorded, names neither it nor its "
                "family, and its label was written no later than the run")}
        if spec:
            spec["outcome"] = outcome(name)
    path.write_text(json.dumps(labels, indent=1) + "\n")
    for name, p in labels["provenance"].items():
        print(f"{name:24s} independent={p['independent']}  {p['why'][:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
