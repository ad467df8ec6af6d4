"""Does vLLM generate with the weights being trained? A check recorded when colocated vLLM runs on CPU.

TRL's colocate mode copies the policy's weights into its vLLM engine before a generation whenever the step
moved on (on CPU the kit then packs them again for vLLM's kernels: ``vllm_colocate``). If that copy silently did
nothing, GRPO would keep sampling from the initial model and still "train". Every run of colocated vLLM on CPU
records, in ``vllm_sync.jsonl`` (after each of the first three steps, then every tenth, and after a final sync):

* at the end of step k, vLLM holds what TRL synced during step k: the weights as they were when step k began;
* at the end of training, after TRL's own ``sync_weights``: the final weights.

Two measures. Greedy agreement, teacher-forced: vLLM's greedy tokens are fed to the policy, and the share of
positions where they are the policy's argmax is reported. Log-probabilities: vLLM's of one fixed completion (its
greedy one for the first probe prompt, 16 tokens) against the policy's own, teacher-forced on both sides, as server
mode checks (``vllm_server``). vLLM computes in
bf16 with packed weights where the CPU has native bf16, the policy in fp32: they differ by rounding, which TRL's
importance-sampling correction (on by default) accounts for in the loss.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transformers import TrainerCallback  # noqa: TID253  # subclassed here: this module loads after Unsloth

from grpo_fast.config import RunConfig
from grpo_fast.models.vllm_colocate import colocated_on_cpu

PROBES = 4
PROBE_TOKENS = 8
LOGPROB_TOKENS = 16  # the fixed completion's length (generated past EOS)
CHECKED_FIRST = 3  # checked after each of the first steps, then after every CHECK_EVERY-th
CHECK_EVERY = 10
FILE = "vllm_sync.jsonl"


def sync_check(cfg: RunConfig, run_dir: Path) -> VLLMSyncCheck | None:
    """The callback for LoRA runs that generate with colocated vLLM on CPU (server mode checks itself:
    models/vllm_server.py); None otherwise."""
    if not (cfg.lora and colocated_on_cpu(cfg)):
        return None
    return VLLMSyncCheck(run_dir / FILE)


class VLLMSyncCheck(TrainerCallback):
    """Records vLLM-vs-policy agreement after every step and after a final sync (see the module docstring)."""

    def __init__(self, path: Path):
        self.path = path
        self.trainer: Any = None
        self.snapshot: dict[str, Any] = {}
        self.probe: tuple[list[int], list[int]] | None = None  # (prompt, completion) for the log-probability check

    def attach(self, trainer: Any) -> None:
        self.trainer = trainer

    # -- the policy at a given point
    def _trainable(self) -> dict[str, Any]:
        return {n: p for n, p in self.trainer.model.named_parameters() if p.requires_grad}

    @staticmethod
    def due(step: int) -> bool:
        return step <= CHECKED_FIRST or step % CHECK_EVERY == 0

    def on_step_begin(self, args, state, control, **kwargs):
        if self.due(state.global_step + 1):
            self.snapshot = {n: p.detach().clone() for n, p in self._trainable().items()}

    def on_step_end(self, args, state, control, **kwargs):
        if self.due(state.global_step):
            self._record(state.global_step, "step_end", self.snapshot)

    def on_train_end(self, args, state, control, **kwargs):
        self.trainer.vllm_generation.sync_weights()  # TRL's own sync, as before a next generation
        self._record(state.global_step, "after_final_sync", None)

    # -- measuring
    def _prompts(self) -> list[str]:
        tok = self.trainer.processing_class
        rows = self.trainer.train_dataset.select(range(min(PROBES, len(self.trainer.train_dataset))))
        return [tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]

    def _agreement(self, sequences: list[tuple[list[int], list[int]]]) -> float:
        import torch

        model = self.trainer.model
        hits = total = 0
        with torch.no_grad():
            for prompt_ids, gen_ids in sequences:
                ids = torch.tensor([prompt_ids + gen_ids], device=model.device)
                logits = model(input_ids=ids).logits[0]
                predicted = logits[len(prompt_ids) - 1:-1].argmax(-1).tolist()
                hits += sum(int(a == b) for a, b in zip(predicted, gen_ids))
                total += len(gen_ids)
        return hits / max(1, total)

    def _record(self, step: int, point: str, weights: dict[str, Any] | None) -> None:
        from vllm import SamplingParams

        llm = self.trainer.vllm_generation.llm
        outputs = llm.generate(self._prompts(), SamplingParams(temperature=0.0, max_tokens=PROBE_TOKENS),
                               use_tqdm=False)
        sequences = [(list(o.prompt_token_ids), list(o.outputs[0].token_ids)) for o in outputs]
        model = self.trainer.model
        was_training = model.training
        model.eval()
        current = {n: p.detach().clone() for n, p in self._trainable().items()}
        prompt = sequences[0][0]  # the completion: what vLLM would generate now (a sampled token is a likely one)
        greedy = llm.generate([{"prompt_token_ids": prompt}], SamplingParams(
            temperature=0.0, max_tokens=LOGPROB_TOKENS, ignore_eos=True), use_tqdm=False)
        self.probe = (prompt, list(greedy[0].outputs[0].token_ids))
        served = self._vllm_logprobs(llm)
        try:
            if weights is not None:
                self._load(weights)
            synced = self._agreement(sequences)
            synced_lp = self._policy_logprobs()
        finally:
            self._load(current)
        with model.disable_adapter():
            initial = self._agreement(sequences)
            initial_lp = self._policy_logprobs()
        model.train(was_training)
        gaps = [abs(a - b) for a, b in zip(served, synced_lp)]
        record = {"step": step, "point": point,
                  "vllm_holds": "weights at the start of this step" if weights is not None else "final weights",
                  "agree_with_synced_policy": round(synced, 4), "agree_with_initial_policy": round(initial, 4),
                  "tokens": sum(len(g) for _, g in sequences), "probe_tokens": len(gaps),
                  "logprob_max_abs_diff": round(max(gaps), 6), "logprob_mean_abs_diff": round(sum(gaps) / len(gaps), 6),
                  "initial_policy_mean_abs_diff": round(sum(abs(a - b) for a, b in zip(served, initial_lp))
                                                        / len(gaps), 6),
                  "vllm_dtype": str(llm.llm_engine.model_config.dtype).removeprefix("torch.")}
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")

    def _vllm_logprobs(self, llm: Any) -> list[float]:
        """vLLM's log-probability of each token of the fixed completion, teacher-forced (prompt log-probs)."""
        from vllm import SamplingParams

        prompt, completion = self.probe
        out = llm.generate([{"prompt_token_ids": prompt + completion}],
                           SamplingParams(max_tokens=1, temperature=1.0, prompt_logprobs=0), use_tqdm=False)
        rows = out[0].prompt_logprobs[len(prompt):]
        return [row[token].logprob for row, token in zip(rows, completion)]

    def _policy_logprobs(self) -> list[float]:
        import torch

        prompt, completion = self.probe
        model = self.trainer.model
        ids = torch.tensor([prompt + completion], device=model.device)
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
        return torch.log_softmax(logits, -1).gather(1, ids[0, len(prompt):, None])[:, 0].tolist()

    def _load(self, weights: dict[str, Any]) -> None:
        import torch

        with torch.no_grad():
            for name, param in self._trainable().items():
                param.copy_(weights[name])
