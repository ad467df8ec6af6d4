"""The ``generation: auto`` probe of colocated vLLM on this CPU, measured once and cached (``models.vllm_probe``).

``probe_for`` answers from the cache or measures in a subprocess (``python -m grpo_fast.run.vllm_measure``): a vLLM
engine in the run's own process would stay there (its threads, its memory, TRL's patched engine class), and a
subprocess can be stopped at the time budget. The subprocess loads the run's model as the run does (the run's
resolved config, LoRA attached), then alternates, under each of the plan's two length limits and for two rounds:

- the engine the run would otherwise generate with (transformers' ``generate`` with TRL's sampling settings and the
  kit's shared prefill and merged LoRA where the run has them), on the run's rows and group;
- TRL's colocated vLLM as the kit runs it on CPU (``vllm_colocate.colocated_generation``: packed weights, the kit's
  weight sync before each generation, timed apart);
- the training pass's forward and backward (with the run's own bf16 autocast and shared-prompt forward where
  ``cpu_choice`` turns them on) and TRL's importance-sampling forward (no grad) over the prompts and the completions
  just sampled, padded to the longest as TRL pads them (once per limit and round: the same for both engines but for
  the forward, which only vLLM's step runs).

Completions are sampled at the run's temperature and stop at their end-of-text, so each point is (the batch's
longest completion, seconds). Prompts are a fixed set of short task prompts: the run's data is read later.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from grpo_fast.config import RunConfig
from grpo_fast.models import machine, vllm_probe
from grpo_fast.models.cpu_choice import choose, cpu_class, cpu_flags
from grpo_fast.models.cpu_speed import (
    busy_aware_threads,
    merged_lora_generation,
    shared_prompt_prefill,
    shared_prompt_training_forward,
)
from grpo_fast.models.loading import load_model
from grpo_fast.models.vllm_colocate import colocated_generation, vllm_cpu_environment
from grpo_fast.run.resolve import resolve_config

PROMPTS = ["Write a Python function that returns the n-th Fibonacci number.",
           "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many "
           "clips did Natalia sell altogether in April and May?",
           "Summarize in two sentences why the sky is blue.",
           "Write a Python function that checks whether a string is a palindrome, with a short docstring."]


def probe_for(cfg: RunConfig, cache: Path | None = None, budget_s: float | None = None) -> dict[str, Any]:
    """This machine's answer for ``cfg``'s plan: cached, else measured now in a subprocess (an ``error`` entry when
    it could not run), and stored either way."""
    plan = vllm_probe.plan_for(cfg)
    key = vllm_probe.probe_key(cpu_class(), plan)
    known = vllm_probe.cached(key, cache)
    if known is not None:
        return known
    budget = budget_s or float(os.environ.get(vllm_probe.BUDGET_ENV) or vllm_probe.BUDGET_S)
    print(f"generation: auto — measuring colocated vLLM against {plan.alternative} on this machine, once "
          f"({plan.rows} rows, limits {plan.lengths[0]} and {plan.lengths[1]} tokens; at most {budget:.0f} s, "
          f"{vllm_probe.BUDGET_ENV} sets it); the answer is cached", flush=True)
    began = time.perf_counter()
    try:
        result = measure_in_subprocess(cfg, plan, budget)
    except ProbeFailed as failed:
        result = {"error": str(failed)}
    result["probe_s"] = round(time.perf_counter() - began, 1)
    return vllm_probe.store(key, result, cache)


def probe_cached(cfg: RunConfig, cache: Path | None = None) -> dict[str, Any]:
    """The cached answer only (a dry run and ``check`` load no weights): where there is none, why not."""
    known = vllm_probe.cached(vllm_probe.probe_key(cpu_class(), vllm_probe.plan_for(cfg)), cache)
    return known if known is not None else {"error": "not measured yet: a dry run or check only reads the cache, "
                                                     "training measures it once"}


class ProbeFailed(Exception):
    """The probe's subprocess did not give an answer (its reason in words)."""


def measure_in_subprocess(cfg: RunConfig, plan: vllm_probe.ProbePlan, budget: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="grpo_fast_vllm_probe_") as tmp:
        request, answer = Path(tmp) / "request.json", Path(tmp) / "answer.json"
        try:
            request.write_text(json.dumps({"config": cfg.to_dict(), "plan": vllm_probe.plan_dict(plan),
                                           "budget_s": budget, "work": tmp}))
        except (TypeError, ValueError) as err:  # a config value JSON cannot hold
            raise ProbeFailed(f"the run's config could not be handed to it ({err})") from None
        env = {**os.environ, machine.VLLM_CPU_ENV: "1"}
        proc = subprocess.Popen([sys.executable, "-m", "grpo_fast.run.vllm_measure", str(request), str(answer)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)  # its own process group: stopped whole at the budget
        try:
            out, _ = proc.communicate(timeout=budget)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise ProbeFailed(f"it ran past its budget of {budget:.0f} s ({vllm_probe.BUDGET_ENV})") from None
        if proc.returncode != 0 or not answer.exists():
            tail = [line for line in out.strip().splitlines() if line.strip()][-1:] or ["no output"]
            raise ProbeFailed(f"its subprocess exited with {proc.returncode}: {tail[0][:300]}")
        return json.loads(answer.read_text())


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def prompt_batch(tokenizer: Any, rows: int, group: int) -> list[list[int]]:
    """The generation batch: ``rows // group`` distinct prompts, each repeated ``group`` times (TRL's order)."""
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(max(1, rows // group))]
    ids = [list(tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                              tokenize=True, return_dict=True)["input_ids"]) for p in prompts]
    return [p for p in ids for _ in range(group)][:rows]


def ended(row: list[int], eos: set[int]) -> list[int]:
    """A completion up to and including its first end-of-text token, as TRL keeps it."""
    for i, token in enumerate(row):
        if token in eos:
            return row[:i + 1]
    return row


class Engines:
    """The run's model with both engines, and the training pass, each timed on one generation batch."""

    def __init__(self, request: dict[str, Any]) -> None:
        import torch

        plan = request["plan"]
        self.torch, self.plan = torch, plan
        cfg = resolve_config(None, {**request["config"], "use_vllm": False, "generation": "generate"})
        loaded = load_model(cfg, announce=False)
        self.model, self.tok = loaded.model, loaded.tokenizer
        self.threads = busy_aware_threads()  # what cpu_threads: auto gives the run
        torch.set_num_threads(self.threads)
        self.prompts = prompt_batch(self.tok, plan["rows"], plan["group"])
        eos = self.tok.eos_token_id
        self.eos = {eos} if isinstance(eos, int) else set(eos or [])
        self.sampling = {"temperature": plan["temperature"], "top_p": plan["top_p"], "top_k": plan["top_k"],
                         "min_p": plan["min_p"], "repetition_penalty": plan["repetition_penalty"]}
        if plan["shared_prefill"]:
            shared_prompt_prefill(self.model)
        if plan["merged_generation"]:
            merged_lora_generation(self.model)
        # the training pass as the run will run it: bf16 autocast where cpu_choice turns it on (its own probe,
        # cached), each group's prompt computed once where shared_prefill is on (both TRL forwards go through it)
        chosen = {c.key: c.value for c in choose(cfg, cls=cpu_class(), threads=self.threads)}
        self.autocast = bool(chosen.get("cpu_autocast_training"))
        if chosen.get("shared_prefill") and not cfg.args.gradient_checkpointing:
            shared_prompt_training_forward(self.model)
        vllm_cpu_environment()
        start = time.perf_counter()
        self.vllm = colocated_generation(self.model, self.tok, Path(request["work"]), plan["rows"],
                                         max_completion_length=plan["lengths"][1], **self.sampling)
        self.engine_start_s = time.perf_counter() - start
        torch.set_num_threads(self.threads)  # vLLM's CPU worker sets torch's threads to its bound cores

    def point(self, rows: list[list[int]], seconds: float, limit: int) -> dict[str, float]:
        return {"limit": limit, "longest": max(len(r) for r in rows), "tokens": sum(len(r) for r in rows),
                "seconds": seconds}

    def generate(self, limit: int) -> tuple[dict[str, float], list[list[int]]]:
        """The other engine, as TRL calls it (its GenerationConfig, left-padded prompts)."""
        from transformers import GenerationConfig

        torch, tok = self.torch, self.tok
        width = max(len(p) for p in self.prompts)
        pad = tok.pad_token_id
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in self.prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in self.prompts])
        config = GenerationConfig(max_new_tokens=limit, do_sample=True, pad_token_id=pad,
                                  bos_token_id=tok.bos_token_id, eos_token_id=sorted(self.eos), disable_compile=True,
                                  **self.sampling)
        self.model.eval()
        start = time.perf_counter()
        with torch.no_grad():
            out = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
        seconds = time.perf_counter() - start
        rows = [ended(r.tolist(), self.eos) for r in out[:, width:]]
        return self.point(rows, seconds, limit), rows

    def generate_vllm(self, limit: int) -> tuple[dict[str, float], list[list[int]], float]:
        """vLLM after the kit's weight sync (as at every step after an optimizer step); the sync timed apart."""
        self.vllm.max_completion_length = limit
        start = time.perf_counter()
        self.vllm.sync_weights()
        synced = time.perf_counter()
        _, completions, _, _ = self.vllm.generate(prompts=self.prompts, images=None,
                                                  num_generations=self.plan["group"])
        seconds = time.perf_counter() - synced
        rows = [list(c) for c in completions]
        return self.point(rows, seconds, limit), rows, synced - start

    def passes(self, rows: list[list[int]], limit: int) -> tuple[dict[str, float], dict[str, float]]:
        """The training forward+backward and TRL's importance-sampling forward over prompts + ``rows``."""
        from trl.trainer.utils import selective_log_softmax

        torch, tok = self.torch, self.tok
        longest = max(1, max(len(r) for r in rows))
        width = max(len(p) for p in self.prompts)
        seqs = [[tok.pad_token_id] * (width - len(p)) + p + r + [tok.pad_token_id] * (longest - len(r))
                for p, r in zip(self.prompts, rows)]
        ids = torch.tensor(seqs)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * (len(p) + len(r)) + [0] * (longest - len(r))
                             for p, r in zip(self.prompts, rows)])

        def logps() -> Any:
            logits = self.model(input_ids=ids, attention_mask=mask, logits_to_keep=longest + 1).logits[:, :-1]
            return selective_log_softmax(logits, ids[:, -longest:])

        self.model.train()
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):  # cpu_speed's, around the loss
            loss = -logps().float().mean()
        loss.backward()
        trained = time.perf_counter() - start
        self.model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        with torch.no_grad():
            logps()
        corrected = time.perf_counter() - start
        return ({"limit": limit, "longest": longest, "seconds": trained},
                {"limit": limit, "longest": longest, "seconds": corrected})


def measure(request: dict[str, Any]) -> dict[str, Any]:
    """Two rounds (one where the budget's half is spent) under each length limit, the engines alternated."""
    began = time.perf_counter()
    load_before = load_average()
    engines = Engines(request)
    short, long = request["plan"]["lengths"]
    engines.generate(short), engines.generate_vllm(short)  # warm-up: first calls allocate, pick kernels
    engines.passes([[engines.tok.eos_token_id or 0] * short] * len(engines.prompts), short)
    found: dict[str, list] = {"generate": [], "vllm": [], "sync_s": [], "train": [], "correction": []}
    for done in range(2):
        if done and time.perf_counter() - began > request["budget_s"] / 2:
            break
        for limit in (short, long):
            order = ("vllm", "generate") if (done + limit) % 2 else ("generate", "vllm")
            for engine in order:
                if engine == "vllm":
                    point, rows, sync = engines.generate_vllm(limit)
                    found["sync_s"].append(sync)
                else:
                    point, rows = engines.generate(limit)
                found[engine].append(point)
            train, correction = engines.passes(rows, limit)  # the last engine's completions: both sample alike
            found["train"].append(train)
            found["correction"].append(correction)
    name, _ = cpu_flags()
    return {**found, "lengths": [short, long], "rows": len(engines.prompts), "alternative":
            vllm_probe.ProbePlan(**{**request["plan"], "lengths": (short, long)}).alternative,
            "threads": engines.threads, "engine_start_s": round(engines.engine_start_s, 1), "cpu": name,
            "cores": os.cpu_count(), "load": f"{load_before} before, {load_average()} after",
            "measure_s": round(time.perf_counter() - began, 1)}


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    Path(argv[1]).write_text(json.dumps(measure(request)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
