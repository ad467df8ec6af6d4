"""Provenance of the recipe runs recorded before bench_recipes.py recorded it itself, read back from git history.

For each run in benchmarks/results/recipes_cpu.json without a provenance of its own:

- ``recorded_in``: the oldest commit from which the run's record (its figures, command, times) is unchanged in the
  results file, i.e. the commit that recorded this run;
- ``code_commit``: that commit's parent, the tree the run most likely started on (bench_recipes.py wrote the
  record at the run's end; the commit followed). The run may have used edits the recording commit then
  committed: ``committed_with_it`` lists the files that commit changed besides the results; ``dirty`` is unknown;
- ``config``: the run's run.yaml as the run wrote it (the recipe YAML with the command's overrides; the kit's
  defaults that filled in the rest were not kept), from the copy of the same run in the health corpus
  (tests/watch/health_corpus/<recipe>-cpu-seed<S>, matched on its held-out figures), checked against the
  recipe YAML at ``code_commit``;
- ``main``: the recipe's headline as the code defines it (``Recipe.metric``); ``main_as_recorded``: the field as
  the run's record had it (some records kept the name used before the headline changed);
- ``intervals``: recipe_noise.intervals on the recorded figures (per-row scores were not kept then: means have none).

A run that bench_recipes.py replaced since keeps its old record under ``replaced`` with the same fields.

    python benchmarks/recipes_reconstruct.py        # rewrites the results file in place; idempotent
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml
from bench_recipes import DEST, MAIN, MAIN_NAME, interval_metrics
from recipe_noise import intervals

ROOT = Path(__file__).resolve().parent.parent
RESULTS_PATH = "benchmarks/results/recipes_cpu.json"
CORPUS = ROOT / "tests" / "watch" / "health_corpus"
CORPUS_AT = {"benchmarks/health_corpus", "tests/watch/health_corpus"}  # where the corpus lived over time
OVERRIDES = ("seed", "cpu_threads", "run_dir")
SAME = ("command", "wall_s", "base", "trained", "machine_start")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def history() -> list[tuple[str, dict]]:
    """Every committed version of the results file, newest first."""
    out = []
    for sha in git("log", "--format=%H", "--", RESULTS_PATH).split():
        try:
            out.append((sha, json.loads(git("show", f"{sha}:{RESULTS_PATH}"))))
        except (subprocess.CalledProcessError, json.JSONDecodeError):
            continue
    return out


def key(record: dict) -> dict:
    return {k: record.get(k) for k in SAME}


def recorded_in(record: dict, versions: list[tuple[str, dict]]) -> str | None:
    """The oldest commit from which ``record`` stands unchanged in every later version."""
    found = None
    for sha, data in versions:
        match = [r for r in data.get("runs", []) if (r["recipe"], r["seed"]) == (record["recipe"], record["seed"])]
        if not match or key(match[0]) != key(record):
            break
        found = sha
    return found


def corpus_config(record: dict) -> tuple[dict | None, str]:
    """The run.yaml of the same run in the health corpus, when its held-out line matches the record's figures."""
    folder = CORPUS / f"{record['recipe']}-cpu-seed{record['seed']}"
    if not (folder / "run.yaml").exists():
        return None, "no copy of this run in the health corpus"
    base, trained = record["base"], record["trained"]
    want = (f"held-out ({base['rows']} rows, base -> trained): "
            f"accuracy {base['accuracy']:.2f} -> {trained['accuracy']:.2f}")
    if want not in (folder / "train.log").read_text():
        return None, f"the health corpus's {folder.name} has other held-out figures: not the same run"
    return yaml.safe_load((folder / "run.yaml").read_text()), (
        f"run.yaml as the run wrote it (recipe YAML + command overrides; defaults not kept), from the copy of the same "
        f"run in tests/watch/health_corpus/{folder.name} (its train.log has the same held-out figures)")


def yaml_at(commit: str, recipe: str) -> dict | None:
    try:
        return yaml.safe_load(git("show", f"{commit}:recipes/{recipe}_cpu.yaml"))
    except subprocess.CalledProcessError:
        return None


def reconstruct(record: dict, versions: list[tuple[str, dict]]) -> dict:
    sha = recorded_in(record, versions)
    if sha is None:
        return record
    parent = git("rev-parse", f"{sha}^").strip()
    changed = [p for p in git("show", "--name-only", "--format=", sha).split()
               if p != RESULTS_PATH and not any(p.startswith(c) for c in CORPUS_AT) and not p.endswith(".md")]
    config, source = corpus_config(record)
    at_commit = yaml_at(parent, record["recipe"])
    record = dict(record)
    record["provenance"] = {
        "reconstructed": True, "recorded_in": sha, "recorded_at": git("log", "-1", "--format=%aI", sha).strip(),
        "code_commit": parent, "dirty": None, "committed_with_it": changed,
        "how": "read back from git history by benchmarks/recipes_reconstruct.py: recorded_in is the oldest commit "
               "from which this record stands unchanged in the results file; code_commit is its parent, the tree "
               "the run most likely started on (it may have used the uncommitted edits listed in "
               "committed_with_it); dirty: unknown"}
    record["config"] = config
    record["config_source"] = source
    if config is not None and at_commit is not None:
        record["config_matches_yaml_at_code_commit"] = (
            {k: v for k, v in config.items() if k not in OVERRIDES} == at_commit)
    record.setdefault("main_as_recorded", record.get("main"))
    record["main"] = MAIN[record["recipe"]]
    record["main_name"] = MAIN_NAME[record["main"]]
    record["intervals"] = intervals(record, interval_metrics(record))
    return record


def main() -> int:
    data = json.loads(DEST.read_text())
    versions = history()
    data["runs"] = [r if (r.get("provenance") or {}).get("reconstructed") is False else reconstruct(r, versions)
                    for r in data["runs"]]
    new = {(r["recipe"], r["seed"]) for r in data["runs"] if (r.get("provenance") or {}).get("reconstructed") is False}
    replaced = {(r["recipe"], r["seed"]): r for r in data.get("replaced", [])}
    for run_key in new - set(replaced):
        old = next((r for r in versions[0][1]["runs"] if (r["recipe"], r["seed"]) == run_key), None) \
            if versions else None
        if old is not None and (old.get("provenance") or {}).get("reconstructed") is not False:
            replaced[run_key] = reconstruct(old, versions)
    if replaced:
        data["replaced"] = sorted(replaced.values(), key=lambda r: (r["recipe"], r["seed"]))
    DEST.write_text(json.dumps(data, indent=2) + "\n")
    for r in data["runs"]:
        given = r.get("provenance") or {}
        print(f"{r['recipe']:14s} seed {r['seed']}: code {str(given.get('code_commit'))[:8]} "
              f"(recorded in {str(given.get('recorded_in'))[:8]}), config {'yes' if r.get('config') else 'no'}, "
              f"{r['main']} {r['intervals'][r['main']]['verdict']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
