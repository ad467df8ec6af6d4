"""The run report on synthetic run directories: plots, tables, unfinished runs, HTML escaping."""

from __future__ import annotations

import base64

import pytest
from report_runs import EVIL, make_run

from grpo_fast.errors import UserError
from grpo_fast.files import append_jsonl, read_jsonl, write_json, write_yaml
from grpo_fast.watch.report import PLOTS_DIR, REPORT_FILE, write_report


def test_report_of_a_finished_run(tmp_path):
    run = make_run(tmp_path / "run")
    write_json(run / "eval.json", {
        "metric": "accuracy", "settings": {"k": 4},
        "base": {"rows": 100, "examples": [{"prompt": "Q", "completion": "no idea", "correct": False}]},
        "trained": {"rows": 100, "system_prompt": "SYSTEM PROMPT TEXT",
                    "examples": [{"prompt": "Q", "completion": EVIL, "correct": True}]},
        "comparison": [{"metric": "accuracy", "base": 0.25, "trained": 0.75, "delta": 0.5},
                       {"metric": "pass@4", "base": 0.5, "trained": 0.9, "delta": 0.4}]})
    path = write_report(run)
    assert path == run / REPORT_FILE
    page = path.read_text()
    assert '<span class="status finished">finished</span>' in page and "status unfinished" not in page
    for name in ("rewards", "reward_std", "zero_std", "kl", "entropy", "length", "clipped"):
        png = (run / PLOTS_DIR / f"{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG")
        assert base64.b64encode(png).decode() in page  # embedded: the HTML stands alone
    assert "Health events (1 warning(s), 0 note(s))" in page
    curve = page[page.index('alt="Completions cut at max_completion_length"'):]
    assert "HEALTH [clipped] step 12</b>: 70% cut &lt;b&gt;<br>remedy: raise max_completion_length" in curve
    head = page[:page.index("<h2>")]  # the first screen answers "did it help?" before anything else
    assert "Training helped: accuracy (greedy) 0.25 -&gt; 0.75 (+50 points) on 100 held-out rows." in head
    assert "<td>accuracy (greedy)</td><td>0.250</td><td>0.750</td>" in head and "<td>pass@4</td>" in head
    assert "1 health warning(s): clipped (first at step 12)" in head
    assert page.count("SYSTEM PROMPT TEXT") == 1  # shown once, not in every row
    side = page[page.index("Base vs trained answers"):]
    assert "no idea</pre>&#10007; wrong" in side and "&#10003; right" in side and "False" not in side
    assert "answer_tags: 1.000" in page
    assert "Reward failures" not in page
    append_jsonl(run / "reward_failures.jsonl", {"step": 4, "reward": "sum_correct", "error": "ValueError: x",
                                                        "completion": EVIL})
    page = write_report(run).read_text()
    assert "Reward failures (1)" in page and "sum_correct: 1 samples" in page and "<answer>" not in page


def test_everything_from_the_run_is_escaped(tmp_path):
    run = make_run(tmp_path / "run")
    write_json(run / "eval.json", {"trained": {"examples": [{"prompt": EVIL, "completion": EVIL}]},
                                          "comparison": []})
    page = write_report(run).read_text()
    assert "<script>" not in page and "<answer>" not in page and "70% cut <b>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;answer&gt;7&lt;/answer&gt;" in page
    append_jsonl(run / "samples.jsonl", {"step": 6, "prompt": "p", "completion": "a\x00b\x10c\nd"})
    page = write_report(run).read_text()
    assert "\x00" not in page and "a\\x00b\\x10c\nd" in page  # control characters shown, never raw


def test_unfinished_run_without_kl_or_eval(tmp_path):
    run = make_run(tmp_path / "run", steps=4, finished=False, kl=False)
    page = write_report(run).read_text()
    assert '<span class="status unfinished">' in page and "last logged step 4" in page
    assert not (run / PLOTS_DIR / "kl.png").exists() and (run / PLOTS_DIR / "rewards.png").exists()
    assert "Not evaluated yet" in page


def test_stopped_run_and_a_run_that_just_started(tmp_path):
    run = make_run(tmp_path / "stopped")
    append_jsonl(run / "health.jsonl", {"step": 20, "kind": "low_reward_std", "action": "stop"})
    assert "stopped early by the health monitor: low_reward_std at step 20" in write_report(run).read_text()
    fresh = tmp_path / "fresh"
    write_yaml(fresh / "config.yaml", {"recipe": "demo"})
    page = write_report(fresh).read_text()
    assert "No metrics logged yet" in page and "No samples logged yet" in page


@pytest.mark.parametrize(("base", "trained", "rows", "word"), [
    (0.0, 0.45, 100, "Training helped"), (0.5, 0.1, 100, "made it worse"), (0.0, 0.12, 16, "No clear change"),
])
def test_verdict_weighs_the_change_against_the_noise(base, trained, rows, word):
    from grpo_fast.watch.report import verdict

    evaluation = {"metric": "accuracy", "trained": {"rows": rows},
                  "comparison": [{"metric": "accuracy", "base": base, "trained": trained, "delta": trained - base}]}
    assert word in verdict(evaluation)[1]


def test_not_a_run_directory(tmp_path):
    with pytest.raises(UserError, match="not a grpo_fast run directory") as info:
        write_report(tmp_path)
    assert "where:" in str(info.value) and "fix:" in str(info.value)
    with pytest.raises(UserError):
        write_report(tmp_path / "missing")


def test_reward_axis_reaches_the_highest_possible_reward(tmp_path):
    import matplotlib.pyplot as plt

    from grpo_fast.watch.plots import PlotSpec, figure

    metrics = read_jsonl(make_run(tmp_path / "run") / "metrics.jsonl")
    fig = figure(PlotSpec("rewards", "t", "y", ("reward",)), metrics, reward_max=6.0)
    low, high = fig.axes[0].get_ylim()
    plt.close(fig)
    assert high >= 6.0 and max(m["reward"] for m in metrics) < 3.0  # the curve's own range would stop near 3


def test_a_converged_note_is_not_headlined_as_a_problem(tmp_path):
    run = make_run(tmp_path / "run")
    (run / "health.jsonl").write_text("")
    append_jsonl(run / "health.jsonl", {"step": 40, "kind": "converged", "message": "mean reward 2.9",
                                               "remedy": "you can stop here", "action": "note"})
    page = write_report(run).read_text()
    head = page[:page.index("<h2>")]
    assert "no health warning; note: converged at step 40 (you can stop here)" in head and "HEALTH [" not in page
    assert "Health events (0 warning(s), 1 note(s))" in page


def test_report_folds_thinking_and_counts_rows_judged_not_applicable(tmp_path):
    run = make_run(tmp_path / "run", steps=3)
    for step in (1, 2, 3):  # the guard logs the share of None per reward (an unparsable gold, no reference)
        append_jsonl(run / "metrics.jsonl", {"step": step, "reward": 0.5,
                                                    "rewards/sum_correct/not_applicable": 0.25 if step == 2 else 0.0})
    append_jsonl(run / "samples.jsonl", {
        "step": 3, "prompt": "What is 3 + 4?", "completion": "3 and 4 <b>make</b> 7.\n</think>\n\n7",
        "thinking": "3 and 4 <b>make</b> 7.", "answer": "7", "thinking_closed": True, "rewards": {"sum_correct": 1.0}})
    append_jsonl(run / "samples.jsonl", {
        "step": 3, "prompt": "What is 3 + 5?", "completion": "hmm, 3 and 5", "thinking": "hmm, 3 and 5",
        "answer": "", "thinking_closed": False, "rewards": {"sum_correct": 0.0}})
    page = write_report(run).read_text()
    assert "<details><summary>thinking (22 characters)</summary><pre>3 and 4 &lt;b&gt;make&lt;/b&gt; 7.</pre>" in page
    assert "never closed: nothing after it was judged" in page and "(no answer)" in page
    assert "sum_correct: not applicable (None)" in page and "8.3% of completions" in page


def test_judge_time_is_shown_beside_the_step_and_each_judges_counts(tmp_path):
    run = make_run(tmp_path / "run", steps=4)
    metrics = read_jsonl(run / "metrics.jsonl")
    (run / "metrics.jsonl").unlink()
    for m in metrics:
        append_jsonl(run / "metrics.jsonl", {**m, "step_time": 10.0, "judge/seconds": 4.0})
    write_json(run / "summary.json", {"steps": 4, "judges": {"llm_judge": {
        "samples": 16, "judged": 12, "screened": 2, "timeouts": 2, "errors": 0, "seconds": 16.0,
        "self_test_agreement": 0.625}}})
    page = write_report(run).read_text()
    assert "10.0 s: judge 4.0 s (40%), generation and training 6.0 s" in page
    assert "16 samples in 16.0 s: 12 judged, 2 screened, 2 timeouts; self-test agreement 0.62" in page
    assert (run / PLOTS_DIR / "time.png").read_bytes().startswith(b"\x89PNG")
    plain = make_run(tmp_path / "plain", steps=4)  # no judge, no step time: neither line nor figure
    page = write_report(plain).read_text()
    assert "judge" not in page.split("<h2>Health events")[0] and not (plain / PLOTS_DIR / "time.png").exists()
