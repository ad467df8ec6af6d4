"""Dynamic sampling on TRL's real GRPOTrainer with the tiny model: uniform groups are replaced by groups of fresh
prompts, the batch keeps its size, the counts are logged, and the cap is kept."""

from __future__ import annotations

import pytest

SAME, VARY = "Say anything, it scores the same.", "Say anything, it scores by its letters."


def _reward(completions, prompts, **kwargs):
    """0.5 for every reply to SAME (a uniform group); a score spread by the reply's characters for VARY."""
    def text(c):
        return c if isinstance(c, str) else c[-1]["content"]
    return [0.5 if SAME in str(p) else (sum(map(ord, text(c))) % 97) / 96 for c, p in zip(completions, prompts)]


def _trainer(tmp_path, rows, max_steps=2):
    from datasets import Dataset
    from tiny import tiny_model, tiny_tokenizer
    from trl import GRPOConfig, GRPOTrainer

    tok = tiny_tokenizer()
    args = GRPOConfig(output_dir=str(tmp_path / "out"), max_steps=max_steps, per_device_train_batch_size=8,
                      num_generations=4, max_completion_length=6, use_cpu=True, bf16=False, report_to="none",
                      save_strategy="no", logging_steps=1, seed=3)
    return GRPOTrainer(model=tiny_model(tok), processing_class=tok, reward_funcs=[_reward], args=args,
                       train_dataset=Dataset.from_list([{"prompt": p} for p in rows]))


def _uniform(advantages, group=4):
    from grpo_fast.run.dynamic_sampling import uniform_groups
    return uniform_groups(advantages, group)


def test_a_uniform_group_is_replaced_by_a_fresh_prompts_group(tmp_path):
    from grpo_fast.run import dynamic_sampling

    trainer = _trainer(tmp_path, [VARY] * 16)  # fresh prompts all have spread
    sampler = dynamic_sampling.install(trainer)
    seen = []
    score = sampler.score
    sampler.score = lambda inputs: seen.append(score(inputs)) or seen[-1]  # record TRL's own batches
    trainer.model.train()
    batch = trainer._generate_and_score_completions([{"prompt": SAME}] * 4 + [{"prompt": VARY}] * 4)

    assert _uniform(seen[0]["advantages"]) == [True, False]  # TRL scored the SAME group without spread
    assert len(seen) == 2 and seen[1]["advantages"].shape[0] == 4  # one fresh group generated
    assert batch["advantages"].shape[0] == 8 and _uniform(batch["advantages"]) == [False, False]
    assert sampler.last == {"groups_dropped": 1, "extra_generations": 4, "effective_groups": 2, "batch_groups": 2}
    # the kept group is TRL's own, row for row; the completions of both calls share one padded width
    kept = seen[0]["completion_ids"][4:]
    assert (batch["completion_ids"][:4, :kept.shape[1]] == kept).all()
    assert batch["completion_ids"].shape[1] == max(s["completion_ids"].shape[1] for s in seen)
    assert batch["prompt_ids"].shape[0] == batch["completion_mask"].shape[0] == 8
    assert int(batch["num_items_in_batch"]) == int(batch["completion_mask"].sum())


def test_training_logs_what_it_dropped_and_keeps_the_cap(tmp_path):
    """Every prompt uniform: each step drops its groups, generates one extra batch (the cap) and, finding no
    spread, trains on the batch it has; the counts land in TRL's log."""
    from grpo_fast.run import dynamic_sampling

    trainer = _trainer(tmp_path, [SAME] * 16)
    dynamic_sampling.install(trainer)
    trainer.train()
    logged = [row for row in trainer.state.log_history if "dynamic_sampling/groups_dropped" in row]
    assert len(logged) == 2
    for row in logged:
        assert row["dynamic_sampling/groups_dropped"] == 4  # 2 in the batch + 2 fresh ones, all uniform
        assert row["dynamic_sampling/extra_generations"] == 8  # capped at one extra batch (2 groups x 4)
        assert row["dynamic_sampling/effective_groups"] == 0


def test_training_with_mixed_prompts_trains_on_groups_with_spread(tmp_path):
    from grpo_fast.run import dynamic_sampling

    trainer = _trainer(tmp_path, [SAME, VARY] * 8, max_steps=3)
    sampler = dynamic_sampling.install(trainer)
    trainer.train()
    logged = [row for row in trainer.state.log_history if "dynamic_sampling/effective_groups" in row]
    assert len(logged) == 3
    assert sum(row["dynamic_sampling/groups_dropped"] for row in logged) > 0  # SAME came up and was dropped
    assert sampler.last["batch_groups"] == 2


def test_setting_auto_follows_measurement_and_bad_values_are_rejected():
    from grpo_fast.errors import UserError
    from grpo_fast.run.dynamic_sampling import MEASURED_WINS, wanted
    from grpo_fast.run.resolve import resolve_config

    assert wanted(True, "demo") and not wanted(False, "demo")
    assert wanted("auto", "demo") and "demo" in MEASURED_WINS  # measured better there (docs/training.md)
    assert not wanted("auto", "code") and not wanted("auto", "demo", processes=2)
    assert resolve_config("demo", ["dynamic_sampling=true"]).dynamic_sampling is True
    with pytest.raises(UserError, match="dynamic_sampling"):
        resolve_config("demo", ["dynamic_sampling=sometimes"])


def test_a_resumed_run_draws_the_refills_the_straight_run_drew(tmp_path):
    """A sampler made at step 2 (a run resumed there) picks the same fresh prompts as one running since step 0."""
    from grpo_fast.run import dynamic_sampling

    rows = [f"{SAME} ({i})" for i in range(12)] + [f"{VARY} ({i})" for i in range(12)]
    trainer = _trainer(tmp_path, rows)
    trainer.model.train()
    batch = [{"prompt": SAME}] * 4 + [{"prompt": VARY}] * 4

    def refills(sampler, step):
        asked = []
        score = sampler.score
        sampler.score = lambda inputs: asked.append([r["prompt"] for r in inputs]) or score(inputs)
        trainer.state.global_step = step
        sampler(batch)
        sampler.score = score
        return asked[1:]  # the first call scores the batch itself

    straight = dynamic_sampling.DynamicSampler(trainer)
    early = [refills(straight, step) for step in (0, 1)]
    later = refills(straight, 2)
    resumed = refills(dynamic_sampling.DynamicSampler(trainer), 2)
    assert later and later == resumed
    assert early[0] != early[1] or early[0] != later  # the draws move with the step
