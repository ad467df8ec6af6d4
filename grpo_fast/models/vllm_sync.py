"""Does vLLM generate with the weights being trained? A check recorded when vLLM runs on CPU (opt-in).

TRL's colocate mode copies the policy's weights into its vLLM engine before a generation whenever the step
moved on. If that copy silently did nothing, GRPO would keep sampling from the initial model and still
"train". With ``GRPO_FAST_VLLM_CPU=1`` (a correctness check, not a speed path) every run records, in
``vllm_sync.jsonl``, how well vLLM's greedy tokens agree with the policy it should hold and with the initial one:

* at the end of step k, vLLM holds what TRL synced during step k: the weights as they were when step k began;
* at the end of training, after TRL's own ``sync_weights``: the final weights.

Agreement is teacher-forced: vLLM's greedy tokens are fed to the policy, and the share of positions where they
are the policy's argmax is reported (vLLM runs in fp16 on CPU, the policy in fp32, so a rare near-tie may differ).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

PROBES = 4
PROBE_TOKENS = 8
FILE = "vllm_sync.jsonl"


def sync_check(cfg: Any, run_dir: Path) -> VLLMSyncCheck | None:
    """The callback for LoRA runs that generate with colocated vLLM on CPU through the opt-in (server mode checks
    itself: models/vllm_server.py); None otherwise."""
    from grpo_fast.models import cuda_available, vllm_cpu_opted_in

    if not (cfg.args.use_vllm and cfg.args.vllm_mode == "colocate" and cfg.lora and vllm_cpu_opted_in()
            and not cuda_available()):
        return None
    return VLLMSyncCheck(run_dir / FILE)


class VLLMSyncCheck(TrainerCallback):
    """Records vLLM-vs-policy agreement after every step and after a final sync (see the module docstring)."""

    def __init__(self, path: Path):
        self.path = path
        self.trainer: Any = None
        self.snapshot: dict[str, Any] = {}

    def attach(self, trainer: Any) -> None:
        self.trainer = trainer

    # -- the policy at a given point
    def _trainable(self) -> dict[str, Any]:
        return {n: p for n, p in self.trainer.model.named_parameters() if p.requires_grad}

    def on_step_begin(self, args, state, control, **kwargs):
        self.snapshot = {n: p.detach().clone() for n, p in self._trainable().items()}

    def on_step_end(self, args, state, control, **kwargs):
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
        try:
            if weights is not None:
                self._load(weights)
            synced = self._agreement(sequences)
        finally:
            self._load(current)
        with model.disable_adapter():
            initial = self._agreement(sequences)
        model.train(was_training)
        record = {"step": step, "point": point,
                  "vllm_holds": "weights at the start of this step" if weights is not None else "final weights",
                  "agree_with_synced_policy": round(synced, 4), "agree_with_initial_policy": round(initial, 4),
                  "tokens": sum(len(g) for _, g in sequences)}
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")

    def _load(self, weights: dict[str, Any]) -> None:
        import torch

        with torch.no_grad():
            for name, param in self._trainable().items():
                param.copy_(weights[name])
