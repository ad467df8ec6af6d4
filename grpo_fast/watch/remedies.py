"""What to do about each kind of alarm, from the troubleshooting table in docs/health.md: one home for the
remedies the rules attach to their events, the report prints and the tests hold the alarm kinds against."""

from __future__ import annotations

REMEDIES: dict[str, str] = {
    "low_reward_std": "groups get (almost) the same reward, so there is nothing to learn from: raise "
                      "num_generations, raise temperature, or use a task/reward with partial credit "
                      "(too hard: every answer 0; a reward that ignores the answer: every answer alike)",
    "zero_std_groups": "groups have identical rewards and the reward is at its floor or the same everywhere: "
                       "give partial credit, use easier prompts (or filter those never solved), raise "
                       "num_generations or temperature, and check the reward reads the completion",
    "kl_high": "the policy drifted far from the reference: lower learning_rate, raise beta, or clip harder "
               "(epsilon)",
    "plateau": "the reward has not risen since the run began: lower or raise learning_rate, raise "
               "num_generations, or check the reward logic with `grpo-fast rewards check`",
    "nonfinite": "loss or gradient is NaN/inf: lower learning_rate, set max_grad_norm (e.g. 1.0), use bf16 "
                 "instead of fp16, and check rewards for NaN/inf",
    "reward_hacking": "a non-judge reward (format, style, length) rises while the judge stays at its floor: the "
                      "model games that reward. Lower its weight (or gate it on correctness) and check the judge's "
                      "logic on real samples (`grpo-fast rewards check`)",
    "judge_hacking": "a judged reward (LLM judge, reward model) rises while the independent check does not, or "
                     "scores completions that address it: the model talks the judge up or games its blind spots. "
                     "Read samples.jsonl, keep the judge's screen on (screen: true), run `grpo-fast rewards check` "
                     "(its injection probes), weigh the independent check more, or use a stronger judge",
    "no_signal": "the reward sat at its maximum with no spread from the first steps: GRPO has nothing to learn. "
                 "Use a harder task (harder prompts, a stricter judge), or run `grpo-fast rewards check` on the "
                 "judge: one that says yes to everything gives wrong answers full marks",
    "no_correct": "the model is never right on these rows: add (or lengthen) an SFT warm-up stage on the gold "
                  "answers (stages: [{sft: true, ...}, {...}], as recipes/*_cpu.yaml do), train on rows it sometimes "
                  "solves (difficulty_filter: 8), raise num_generations, or use a bigger model",
    "clipped": "many completions hit max_completion_length and are cut off: raise max_completion_length, "
               "ask for shorter answers in the prompt, or add a length penalty",
    "thinking_open": "thinking never closes: the completions cut at max_completion_length are still thinking, so "
                     "they never reach an answer and every correctness reward gives them 0. Raise "
                     "max_completion_length (thinking models need 1-4k tokens), ask for shorter reasoning, or set "
                     "thinking: off",
    "entropy_collapse": "token entropy collapsed while the reward did not rise: the model answers the same way "
                        "every time. Lower learning_rate, raise temperature, or check samples.jsonl for "
                        "repeated text",
    "reward_errors": "a reward raises (or returns NaN) on some completions, which then count as not applicable: "
                     "see reward_failures.jsonl in the run directory and fix the reward for those inputs",
    "converged": "the reward is at its maximum and no longer moving: later steps add little, so you can stop "
                 "here (or make the task harder)",
}
NOTES = frozenset({"converged"})
"""Informational kinds: printed once, recorded, never a warning and never a reason to stop."""
