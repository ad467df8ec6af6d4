"""benchmarks/results/recipes_cpu.json against what README.md and docs/benchmarks.md say of it (issue 52, part 5):
every run traced (commit, config, headline named), every held-out figure with its interval, and "learns" said only
where the trained interval clears the base one."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_recipes import DEST, MAIN, interval_metrics, table  # noqa: E402
from recipe_noise import bootstrap, intervals, verdict, wilson  # noqa: E402

from grpo_fast.recipes import get_recipe  # noqa: E402

DATA = json.loads(DEST.read_text())
RUNS = DATA["runs"]
README = (ROOT / "README.md").read_text()
BENCH_DOC = (ROOT / "docs" / "benchmarks.md").read_text()


def test_wilson_and_bootstrap_behave():
    lo, hi = wilson(4, 16)
    assert lo < 4 / 16 < hi and round(lo, 3) == 0.102 and round(hi, 3) == 0.495  # the textbook 4 of 16
    assert wilson(0, 16)[0] == 0.0 and wilson(16, 16)[1] == 1.0
    assert wilson(1, 100)[1] - wilson(1, 100)[0] < wilson(1, 10)[1] - wilson(1, 10)[0]  # more rows, narrower
    same = bootstrap([0.5] * 9)
    assert same == (0.5, 0.5)
    spread = bootstrap([0.0, 1.0] * 8)
    assert spread[0] < 0.5 < spread[1]
    assert verdict([0.0, 0.2], [0.3, 0.6]) == "learns" and verdict([0.0, 0.4], [0.3, 0.6]) == "within noise"
    assert verdict(None, [0.3, 0.6]) == "no interval" and verdict([0.5, 0.7], [0.1, 0.2]) == "falls"


@pytest.mark.parametrize("run", RUNS, ids=[f"{r['recipe']}-{r['seed']}" for r in RUNS])
def test_every_run_is_traced(run):
    given = run["provenance"]
    assert re.fullmatch(r"[0-9a-f]{40}", given["code_commit"])
    if given["reconstructed"]:
        assert re.fullmatch(r"[0-9a-f]{40}", given["recorded_in"]) and given["dirty"] is None
    else:
        assert isinstance(given["dirty"], bool)
    assert isinstance(run["config"], dict) and run["config"]["seed"] == run["seed"]
    assert run["config"]["recipe"] == run["recipe"]
    assert run["main"] == get_recipe(run["recipe"]).metric == MAIN[run["recipe"]] and run["main_name"]


@pytest.mark.parametrize("run", RUNS, ids=[f"{r['recipe']}-{r['seed']}" for r in RUNS])
def test_every_interval_is_what_the_figures_give(run):
    assert run["intervals"] == json.loads(json.dumps(intervals(run, interval_metrics(run))))
    main = run["intervals"][run["main"]]
    for side in ("base", "trained"):
        if main[side] is not None:
            assert main[side][0] <= run[side][run["main"]] <= main[side][1]
        else:
            assert "per_row" not in run[side]  # a missing interval only where no per-row scores were kept


def test_the_docs_table_is_the_json():
    block = re.search(r"<!-- recipes-cpu:begin[^>]*-->\n(.*?)<!-- recipes-cpu:end -->", BENCH_DOC, re.S).group(1)
    assert block.strip() == table(RUNS).strip()


def readme_row(recipe: str) -> str:
    return next(line for line in README.splitlines() if line.startswith(f"| `{recipe}` |"))


@pytest.mark.parametrize("recipe", sorted({r["recipe"] for r in RUNS}))
def test_readme_and_docs_say_learns_only_where_the_interval_clears(recipe):
    mine = [r for r in RUNS if r["recipe"] == recipe]
    learned = [r for r in mine if r["intervals"][r["main"]]["verdict"] == "learns"]
    row = readme_row(recipe)
    assert ("learns" in row) == bool(learned), row
    if not learned:
        assert f"**{recipe} learns**" not in BENCH_DOC
    if "within noise" in row:
        assert any(r["intervals"][r["main"]]["verdict"] == "within noise" for r in mine)


def test_greedy_accuracy_is_not_called_pass_at_1():
    for text in (README, BENCH_DOC):
        assert not re.search(r"greedy pass@1", text)


@pytest.mark.parametrize("recipe", ["code", "qa"])
def test_readme_accuracy_ranges_are_the_json(recipe):
    mine = [r for r in RUNS if r["recipe"] == recipe]
    found = re.search(r"greedy accuracy[^0-9]*([0-9.]+)-([0-9.]+) → ([0-9.]+)(?:-([0-9.]+))?", readme_row(recipe))
    base = sorted(r["base"]["accuracy"] for r in mine)
    trained = sorted(r["trained"]["accuracy"] for r in mine)
    assert (float(found.group(1)), float(found.group(2))) == (round(base[0], 2), round(base[-1], 2))
    assert float(found.group(3)) == round(trained[0], 2)
    assert float(found.group(4) or found.group(3)) == round(trained[-1], 2)
