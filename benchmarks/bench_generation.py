"""Generation engines side by side: the same trainer, prompts, sampling settings and seed, one engine at a time.

Engines (``grpo_fast.models.generation``), each on the kit's real GRPOTrainer (TRL 1.14.2) built for a recipe:

- ``trl``: TRL's default path (``model.generate``, dynamic KV cache, peft's three matmuls per LoRA layer);
- ``static_cache``: the same with ``cache_implementation: static`` (torch.compile off, as TRL sets it);
- ``continuous_batching``: TRL's ``use_transformers_continuous_batching`` (``generate_batch``, paged KV cache);
- ``kit``: ``model.generate`` with the kit's merged-LoRA generation and shared prompt prefill (``cpu_speed``).

Each round runs every engine once, the order rotated round by round so load changes meet them alike, and times a
whole ``trainer.training_step`` (generation, rewards, training forward and backward: a step without the optimizer)
and, inside it, the generation. The LoRA B matrices get small random values first (a trained adapter's scale), so
the adapter changes the model and the engines that fold it differently are really compared.

``--vllm-colocate`` (in ``.venv-vllm`` with vLLM's CPU build) adds ``vllm_colocate``: TRL's colocated vLLM on a
second trainer built the same way with ``use_vllm``, as the kit runs it on CPU (``grpo_fast.models.vllm_colocate``:
bf16 weights packed for vLLM's CPU kernels, the merged LoRA weights loaded and packed again at each sync). Its
step time includes the sync (forced before every step, as after each optimizer step) and its row gives the sync's
cost (ms, MB pushed). vLLM's OpenMP threads are bound to as many cores as the torch engines use.

``--vllm-server`` (in ``.venv-vllm`` with vLLM's CPU build) adds ``vllm_server``: the kit's server mode by adapter
(``grpo_fast.models.vllm_server``) on a second trainer built the same way with ``vllm_mode=server``, against vLLM's
OpenAI server started here with its own threads (bf16, packed weights; ``--enable-lora``). Its step time includes
the adapter sync (save, load, unload: forced before every step, as after each optimizer step), and its row gives the
sync's cost (ms, MB). On a 2-core machine the server and the trainer share the cores; on GPUs they would not.

``--fixed-length`` makes every completion exactly ``max_completion_length`` tokens (``min_new_tokens`` for
transformers, ``min_tokens`` for vLLM): sampled lengths vary a lot with 8 rows (one row that runs to the limit pads
the whole training batch to it), and vLLM draws its own random numbers, so without it two engines' steps may
train on very different token counts; with it every engine's step generates and trains on the same 8 x 512 tokens.

Same distribution: every engine is also run greedily on the same prompts; the share of rows whose greedy tokens
equal ``trl``'s says the logits agree (up to rounding, which may flip a near tie late in a row). Engines that
draw random numbers in the same order give the same sampled rows with the same seed (``sampled same``);
continuous batching draws in another order, so there only the greedy check applies.

    nice -n 10 .venv/bin/python benchmarks/bench_generation.py [--shapes demo code] [--rounds 3] [--no-warmup]
        [--engines trl static_cache continuous_batching kit] [--out benchmarks/results/bench_generation.json]
        [--fixed-length]
    GRPO_FAST_VLLM_CPU=1 nice -n 10 .venv-vllm/bin/python benchmarks/bench_generation.py --vllm-colocate
        --vllm-server --engines trl kit ...
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

# the demo's shape (8 completions of 16 tokens for one prompt) and the code recipe's (8 of 512)
SHAPES = {"demo": ("demo", []), "code": ("code", [])}
COMMON = ["profile=cpu", "save_strategy=no", "evaluate=false", "health=false", "shared_prefill=false",
          "merged_generation=false", "generation=generate"]
GREEDY_TOKENS = {"demo": 16, "code": 64}
AUTO_GOAL = 1.05


def machine() -> dict[str, str]:
    """The CPU and its load, named with every figure (the machine is shared)."""
    name = next((line.split(":", 1)[1].strip() for line in subprocess.run(
        ["lscpu"], capture_output=True, text=True).stdout.splitlines() if line.startswith("Model name")),
        platform.processor())
    return {"cpu": name, "cores": str(os.cpu_count()), "load": " ".join(f"{x:.2f}" for x in os.getloadavg())}


def build(recipe: str, extra: list[str], threads: int, run_dir: Path) -> tuple[Any, Any, list[dict]]:
    """The kit's trainer for ``recipe`` with every generation speed-up off, and one batch of its rows."""
    import torch

    from grpo_fast.models import load_model
    from grpo_fast.run.prepare import prepare
    from grpo_fast.run.resolve import resolve_config
    from grpo_fast.run.stages import build_trainer

    cfg = resolve_config(recipe, [*COMMON, f"cpu_threads={threads}", f"run_dir={run_dir}", *extra])
    prep = prepare(cfg)
    loaded = load_model(cfg)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in loaded.model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.02)
    trainer, _ = build_trainer(prep, loaded, run_dir)
    trainer.current_gradient_accumulation_steps = cfg.args.gradient_accumulation_steps  # train() sets it
    group, batch = cfg.args.num_generations, cfg.args.per_device_train_batch_size
    rows = [prep.train_rows[i] for i in range(batch // group) for _ in range(group)]
    return trainer, cfg, rows


def timed_generation(trainer: Any) -> dict[str, Any]:
    """Wrap TRL's ``_generate_single_turn`` to time it and keep what it generated."""
    seen: dict[str, Any] = {"seconds": 0.0, "tokens": 0, "completions": []}
    original = trainer._generate_single_turn

    def generate(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        completion_ids, logprobs = original(*args, **kwargs)
        seen["seconds"] += time.perf_counter() - start
        seen["tokens"] += sum(len(c) for c in completion_ids)
        seen["completions"] = [list(c) for c in completion_ids]
        return completion_ids, logprobs

    trainer._generate_single_turn = generate
    return seen


def one_step(trainer: Any, rows: list[dict], seen: dict[str, Any], seed: int) -> dict[str, Any]:
    import torch

    seen.update(seconds=0.0, tokens=0)
    torch.manual_seed(seed)
    trainer.model.train()
    start = time.perf_counter()
    trainer.training_step(trainer.model, rows, None)
    step = time.perf_counter() - start
    trainer.model.zero_grad(set_to_none=True)
    return {"step_s": step, "gen_s": seen["seconds"], "tokens": seen["tokens"], "completions": seen["completions"]}


def greedy(trainer: Any, rows: list[dict], tokens: int) -> list[list[int]]:
    """Greedy completions of the batch's prompts through TRL's own generation call."""
    import torch

    tok = trainer.processing_class
    prompt_ids = [tok.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=True) for r in rows]
    prompt_ids = [p["input_ids"] if isinstance(p, dict) or hasattr(p, "keys") else p for p in prompt_ids]
    saved = (trainer.generation_config.do_sample, trainer.generation_config.max_new_tokens,
             dict(trainer.generation_kwargs))
    trainer.generation_config.do_sample, trainer.generation_config.max_new_tokens = False, tokens
    trainer.generation_kwargs.update(do_sample=False, max_new_tokens=tokens)
    try:
        trainer.model.eval()
        with torch.no_grad():
            completions, _ = trainer._generate_single_turn(prompt_ids, None, {}, 1)
    finally:
        trainer.generation_config.do_sample, trainer.generation_config.max_new_tokens = saved[:2]
        trainer.generation_kwargs.clear()
        trainer.generation_kwargs.update(saved[2])
    return [list(c) for c in completions]


def same_rows(a: list[list[int]], b: list[list[int]]) -> float:
    return sum(x == y for x, y in zip(a, b)) / max(1, len(a))


def greedy_vllm(trainer: Any, rows: list[dict], tokens: int) -> list[list[int]]:
    """Greedy completions through TRL's vLLM generation (its own sampling settings, temperature 0)."""
    tok = trainer.processing_class
    prompt_ids = [tok.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=True, return_dict=False)
                  for r in rows]
    gen = trainer.vllm_generation
    saved = gen.temperature, gen.max_completion_length
    gen.temperature, gen.max_completion_length = 0.0, tokens
    try:
        completions, _ = trainer._generate_single_turn(prompt_ids, None, {}, 1)
    finally:
        gen.temperature, gen.max_completion_length = saved
    return [list(c) for c in completions]


@contextlib.contextmanager
def server_trainer(recipe: str, extra: list[str], threads: int, run_dir: Path) -> Any:
    """vLLM's OpenAI server (CPU build, bf16) and a kit trainer in server mode by adapter talking to it."""
    from grpo_fast.models import resolve_model_path
    from grpo_fast.models.vllm_colocate import vllm_cpu_environment
    from grpo_fast.models.vllm_server import local_server

    vllm_cpu_environment()
    run_dir.mkdir(parents=True)
    with local_server(resolve_model_path("embedded"), run_dir / "server.log", dtype="bfloat16") as served:
        port = served.url.rsplit(":", 1)[1]
        trainer, cfg, rows = build(recipe, [*extra, "use_vllm=true", "vllm_mode=server",
                                            "vllm_server_host=127.0.0.1", f"vllm_server_port={port}"], threads,
                                   run_dir / "run")
        yield trainer


def colocate_trainer(recipe: str, extra: list[str], threads: int, run_dir: Path) -> Any:
    """A kit trainer generating with TRL's colocated vLLM (CPU build, packed weights re-packed at each sync)."""
    import torch

    trainer, _, _ = build(recipe, [*extra, "use_vllm=true", "vllm_mode=colocate"], threads, run_dir / "run")
    torch.set_num_threads(threads)  # vLLM's CPU worker sets torch's threads to its bound cores
    return trainer


def colocate_costs(run_dir: Path, timed: int) -> dict[str, Any]:
    """The weight syncs' cost from the run's vllm_colocate_sync.jsonl (median over the timed steps' syncs)."""
    from grpo_fast.models.vllm_colocate import FILE

    records = [json.loads(line) for line in (run_dir / "run" / FILE).read_text().splitlines()][-timed:]
    return {key: round(statistics.median(r[key] for r in records), 1) for key in ("sync_ms", "load_ms", "pack_ms")} | {
        "pushed_mb": records[-1]["pushed_mb"], "tensors": records[-1]["tensors"],
        "layers_packed": records[-1]["layers_packed"], "syncs": len(records)}


def sync_costs(run_dir: Path) -> dict[str, Any]:
    """The adapter syncs' cost from the run's vllm_server_sync.jsonl (median over the timed steps)."""
    from grpo_fast.models.vllm_server import FILE

    records = [json.loads(line) for line in (run_dir / "run" / FILE).read_text().splitlines()]
    return {"sync_ms": round(statistics.median(r["sync_ms"] for r in records), 1),
            "adapter_mb": records[-1]["adapter_mb"], "syncs": len(records),
            "logprob_max_abs_diff": max(r.get("logprob_max_abs_diff", 0.0) for r in records),  # bf16 server
            "check_ms": [r["check_ms"] for r in records if "check_ms" in r]}


def auto_pick(cfg: Any) -> tuple[str, str]:
    """The engine ``generation: auto`` picks for this shape on this machine (as a bench row's name) and why."""
    from grpo_fast.models.generation import choose_engine, vllm_choice, vllm_facts, vllm_refusal
    from grpo_fast.run.vllm_measure import probe_for

    auto = cfg.model_copy(update={"generation": "auto"})
    facts = vllm_facts(cuda=False)
    measured = None if vllm_refusal(auto, cuda=False, vllm=facts["vllm"]) else probe_for(auto)  # cached, else once
    on, why = vllm_choice(auto, **facts, probe=measured)
    if on:
        return "vllm_colocate", why
    choice = choose_engine(auto, cuda=False)
    # under the cpu profile generate comes with the kit's speed-ups: the kit engine
    return {"generate": "kit"}.get(choice.value, choice.value), f"{choice.why}; not vLLM: {why}"


def fix_length(trainer: Any) -> None:
    """Every completion exactly max_completion_length tokens, on whichever engine the trainer generates with."""
    tokens = trainer.args.max_completion_length
    if getattr(trainer, "vllm_generation", None) is not None:
        trainer.vllm_generation.generation_kwargs["min_tokens"] = tokens
    else:
        trainer.generation_config.min_new_tokens = tokens
        trainer.generation_kwargs["min_new_tokens"] = tokens


def run_shape(shape: str, engines: list[str], rounds: int, threads: int, warmup: bool,
              vllm_server: bool = False, vllm_colocate: bool = False, fixed: bool = False) -> dict[str, Any]:
    from grpo_fast.models.cpu_speed import use_engine

    recipe, extra = SHAPES[shape]
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        trainer, cfg, rows = build(recipe, extra, threads, Path(tmp) / "run")
        seen = timed_generation(trainer)
        trainers = {e: (trainer, seen, functools.partial(use_engine, trainer, e)) for e in engines}
        if vllm_colocate:
            colocated = colocate_trainer(recipe, extra, threads, Path(tmp) / "colocate")
            trainers["vllm_colocate"] = (colocated, timed_generation(colocated), contextlib.nullcontext)
            engines = [*engines, "vllm_colocate"]
        if vllm_server:
            served = stack.enter_context(server_trainer(recipe, extra, threads, Path(tmp) / "server"))
            trainers["vllm_server"] = (served, timed_generation(served), contextlib.nullcontext)
            engines = [*engines, "vllm_server"]
        runs: dict[str, list[dict]] = {e: [] for e in engines}
        greedy_rows: dict[str, list[list[int]]] = {}
        for engine in engines:  # warm-up (first calls allocate) and the greedy check
            model, watched, scope = trainers[engine]
            with scope():
                pick = greedy_vllm if engine.startswith("vllm") else greedy
                greedy_rows[engine] = pick(model, rows, GREEDY_TOKENS[shape])
                if warmup:
                    one_step(model, rows, watched, seed=1)
        if vllm_server:  # its log-probability check ran at the first load; a long run checks every tenth only
            trainers["vllm_server"][0].vllm_generation.probe_prompt = None
        if fixed:  # after the greedy check (64 tokens)
            for model, _, _ in trainers.values():
                fix_length(model)
        for r in range(rounds):
            order = engines[r % len(engines):] + engines[:r % len(engines)]
            for engine in order:
                model, watched, scope = trainers[engine]
                if engine.startswith("vllm"):
                    model._last_loaded_step = -1  # sync inside the step, as after each optimizer step
                with scope():
                    runs[engine].append(one_step(model, rows, watched, seed=100 + r))
                print(f"  {shape} round {r + 1} {engine}: step {runs[engine][-1]['step_s']:.1f} s, generation "
                      f"{runs[engine][-1]['gen_s']:.1f} s, {runs[engine][-1]['tokens']} tokens", flush=True)
        auto, why = auto_pick(cfg)
        syncs = sync_costs(Path(tmp) / "server") if vllm_server else None
        colocate_syncs = colocate_costs(Path(tmp) / "colocate", rounds) if vllm_colocate else None
    table = {}
    for engine in engines:
        gen = statistics.median(x["gen_s"] for x in runs[engine])
        table[engine] = {
            "step_s": statistics.median(x["step_s"] for x in runs[engine]),
            "steps_per_s": statistics.median(1 / x["step_s"] for x in runs[engine]),
            "generation_s": gen,
            "tokens_per_s": statistics.median(x["tokens"] / x["gen_s"] for x in runs[engine]),
            "tokens": statistics.median(x["tokens"] for x in runs[engine]),
            "greedy_same_rows": same_rows(greedy_rows[engine], greedy_rows["trl"]) if "trl" in greedy_rows else None,
            "sampled_same_rows": statistics.mean(same_rows(x["completions"], y["completions"])
                                                 for x, y in zip(runs[engine], runs["trl"]))
            if "trl" in runs and not engine.startswith("vllm") else None,  # vLLM draws its own random numbers
        }
    if syncs:
        table["vllm_server"]["adapter_sync"] = syncs
    if colocate_syncs:
        table["vllm_colocate"]["weight_sync"] = colocate_syncs
    return {"shape": f"{cfg.args.per_device_train_batch_size} x {cfg.args.max_completion_length} tokens "
                     f"({recipe})", "engines": table, "auto": {"engine": auto, "why": why}}


def report(shape: str, result: dict[str, Any]) -> list[str]:
    table = result["engines"]
    base = table.get("trl")
    fastest = max(table, key=lambda e: table[e]["steps_per_s"])  # steps/s: the weight syncs included
    lines = [f"\n{shape}: {result['shape']}",
             f"{'engine':22} {'step s':>8} {'steps x':>8} {'gen s':>8} {'tok/s':>8} {'x trl':>7} {'greedy=':>8} "
             f"{'sampled=':>9}"]
    for engine, row in table.items():
        ratio = row["tokens_per_s"] / base["tokens_per_s"] if base else float("nan")
        steps = row["steps_per_s"] / base["steps_per_s"] if base else float("nan")
        same = [f"{x:.2f}" if x is not None else "-" for x in (row["greedy_same_rows"], row["sampled_same_rows"])]
        lines.append(f"{engine:22} {row['step_s']:8.1f} {steps:8.2f} {row['generation_s']:8.2f} "
                     f"{row['tokens_per_s']:8.1f} {ratio:7.2f} {same[0]:>8} {same[1]:>9}")
        for key in ("adapter_sync", "weight_sync"):
            if key in row:
                lines.append(f"{'':22} {key.replace('_', ' ')} in the step: {row[key]}")
    auto = result["auto"]["engine"]
    if auto in table:
        share = table[auto]["steps_per_s"] / table[fastest]["steps_per_s"]
        vs_trl = f", {table[auto]['steps_per_s'] / base['steps_per_s']:.2f}x trl's steps/s" if base else ""
        lines.append(f"auto -> {auto} ({result['auto']['why']}): {share:.2f} of the fastest's steps/s ({fastest})"
                     f"{vs_trl}; goal >= {1 / AUTO_GOAL:.2f}")
    return lines


def main() -> None:
    from grpo_fast.models.cpu_speed import busy_aware_threads
    from grpo_fast.models.generation import ENGINES

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=list(ENGINES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: the free cores, once)")
    parser.add_argument("--no-warmup", action="store_true", help="skip each engine's untimed first step (long shapes)")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    parser.add_argument("--fixed-length", action="store_true",
                        help="every completion exactly max_completion_length tokens (all engines the same work)")
    parser.add_argument("--vllm-colocate", action="store_true",
                        help="add colocated vLLM, packed weights (needs vLLM; CPU: GRPO_FAST_VLLM_CPU=1, .venv-vllm)")
    parser.add_argument("--vllm-server", action="store_true",
                        help="add vLLM server mode by adapter (needs vLLM; on CPU: GRPO_FAST_VLLM_CPU=1, .venv-vllm)")
    args = parser.parse_args()
    threads = args.threads or busy_aware_threads()
    if args.vllm_colocate or args.vllm_server:  # vLLM's OpenMP threads on as many cores as torch's
        cores = sorted(os.sched_getaffinity(0))[:threads]
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, cores)))
    before = machine()
    print(f"CPU {before['cpu']} ({before['cores']} cores), load {before['load']}, {threads} torch thread(s)",
          flush=True)
    results = {shape: run_shape(shape, args.engines, args.rounds, threads, not args.no_warmup, args.vllm_server,
                                args.vllm_colocate, args.fixed_length) for shape in args.shapes}
    after = machine()
    lines = [f"CPU {before['cpu']}, {threads} thread(s); load before {before['load']}, after {after['load']}"]
    for shape, result in results.items():
        lines += report(shape, result)
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text(json.dumps({"machine": before, "load_after": after["load"],
                                              "date": time.strftime("%Y-%m-%d"), "threads": threads,
                                              "rounds": args.rounds, "results": results,
                                              "fixed_length": args.fixed_length,
                                              "vllm_cpu_omp_threads_bind": os.environ.get("VLLM_CPU_OMP_THREADS_BIND")},
                                             indent=1))


if __name__ == "__main__":
    main()
