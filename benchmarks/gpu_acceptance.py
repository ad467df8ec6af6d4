"""GPU acceptance run: one command on a GPU machine, offline, within 15 minutes; one JSON file out.

    python benchmarks/gpu_acceptance.py --wheels /path/to/wheels      # full mode on a CUDA GPU
    python benchmarks/gpu_acceptance.py --reduced                      # CPU: a tiny model, the same phases

Target machine: Python 3.12, torch 2.11 + CUDA 13, transformers 5.17, peft, accelerate 1.15, triton 3.6, no
model hub, and at most 64 MiB of extra wheels (unsloth, unsloth-zoo, trl, datasets and grpo_fast's small pure
dependencies fit; vLLM does not). Phases, each of which runs or says in one line why not:

1. set-up: ``pip install --no-index --no-deps`` of every wheel in ``--wheels`` (timed, size reported);
2. environment: versions, GPU, what imports;
3. a randomly initialised model built from a config (Qwen2.5-0.5B shapes; tiny Llama in reduced mode) with
   the tests' in-process tokenizer, saved to a temp folder: no hub;
4. the same GRPO config trained with transformers + PEFT and with Unsloth, each in its own process: step time,
   generated tokens/s, peak GPU memory, and the memory planner's estimate against the measured peak; then the
   memory profile's path on Unsloth: 4-bit LoRA, and 4-bit inside vLLM where vLLM and its bitsandbytes plugin
   are on the device (each measured against the planner the same way, or skipped with the reason);
5. chat and batch generate with the trained adapter; adapter and merged export, the merged model checked to
   generate what base + adapter generates; GGUF is not attempted (Unsloth builds llama.cpp from source over
   the network);
6. tools (``--no-tools`` skips it; ``--no-train`` skips 3-5 and runs only this one): a tiny Qwen2 trained
   in-process to call the ``python`` tool (tests/helpers/tool_caller.py), then 2 GRPO steps of the tool_math recipe
   through TRL's tool loop with the kit's sandboxed ``PythonSession``, per backend in its own process: TRL's
   tool-call and tool-failure frequencies and the ``python_ran`` reward. A random model never writes a call,
   so phase 4 cannot exercise the loop.

Docs: docs/gpu_acceptance.md (what it prints on a GPU, and why each skip).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MAX_EXTRA_MIB = 64
LOGS_ENV = "GPU_ACCEPTANCE_LOGS"  # a folder: each backend worker's full output is written there
FULL = {"steps": 5, "completion": 256, "generations": 8, "model": "qwen2.5-0.5b"}
REDUCED = {"steps": 2, "completion": 8, "generations": 4, "model": "tiny-llama"}
# A length reward counted in words, which vary between random completions of a fixed token count (so GRPO's
# advantages are not all 0 and the adapter moves), and the demo's correctness reward, which the kit requires.
def rewards(completion_tokens: int) -> list[dict[str, Any]]:
    return [{"name": "ideal_length", "target": max(4, completion_tokens // 2)},
            {"name": "numeric_match", "weight": 2.0}]
PROMPTS = ["What is 3 + 4?", "What is 12 + 5?"]
# The tools phase: the same shape in both modes (the tool caller is tiny). The taught completion is 62 tokens (the
# call 35, the tool's reply as TRL renders it 24, the answer 3); 96, the recipe's default, leaves room for sampled
# variants.
TOOLS = {"steps": 2, "generations": 4, "completion": 96, "tool_iterations": 2}
TOOL_METRICS = {"call_frequency": "tools/call_frequency", "failure_frequency": "tools/failure_frequency",
                "python_ran": "rewards/python_ran/mean", "answer_correct": "rewards/final_answer_correct/mean",
                "step_s": "step_time"}
VERSIONS = ("torch", "transformers", "peft", "accelerate", "triton", "trl", "datasets", "unsloth", "unsloth_zoo",
            "vllm", "xformers", "bitsandbytes", "grpo_fast")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _imports(module: str) -> str:
    """'ok' or why not, in a subprocess (Unsloth patches transformers on import; a crash must not kill us)."""
    if importlib.util.find_spec(module) is None:
        return "not installed"
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return "ok" if proc.returncode == 0 else "import fails: " + (lines[-1][:200] if lines else str(proc.returncode))


# --------------------------------------------------------------------------- phases


def setup(wheels: str | None) -> dict[str, Any]:
    """Install the brought wheels offline (no index, no dependency resolution: the machine has the rest)."""
    if not wheels:
        return {"status": "skipped", "why": "no --wheels given: using what is installed"}
    files = sorted(Path(wheels).glob("*.whl"))
    if not files:
        return {"status": "failed", "why": f"no .whl files in {wheels}"}
    mib = sum(f.stat().st_size for f in files) / 2**20
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                           *map(str, files)], capture_output=True, text=True, timeout=600)
    out = {"status": "ok" if proc.returncode == 0 else "failed", "wheels": [f.name for f in files],
           "size_mib": round(mib, 1), "within_allowance": mib <= MAX_EXTRA_MIB,
           "seconds": round(time.time() - start, 1)}
    if proc.returncode:
        out["why"] = (proc.stderr.strip().splitlines() or ["?"])[-1][:300]
    return out


def environment() -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {"python": platform.python_version(), "cuda": torch.cuda.is_available(),
                           "versions": {d: _version(d.replace("_", "-")) or _version(d) for d in VERSIONS}}
    if env["cuda"]:
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, gpu_gib=round(props.total_memory / 2**30, 1), cuda_version=torch.version.cuda,
                   capability=".".join(map(str, torch.cuda.get_device_capability(0))))
    env["imports"] = {m: _imports(m) for m in ("unsloth", "vllm", "bitsandbytes")} if env["cuda"] else {}
    return env


def lock_report(asked: str) -> dict[str, Any]:
    """Which lock ran (read off the installed torch's CUDA and vLLM), which the host's decision names
    (grpo_fast/models/host_lock.py), and whether that is the one asked for (``--lock``)."""
    import torch

    from grpo_fast.models import host_lock

    cuda = torch.version.cuda
    ran = "cpu" if not cuda else "cu12" if cuda.startswith("12.") else "cu13" if cuda.startswith("13.") else cuda
    decision = host_lock.decide(host_lock.read_host())
    installed = {d: _version(d) for d in ("torch", "vllm", "unsloth", "unsloth-zoo", "bitsandbytes", "xformers",
                                          "vllm-bnb-plugin")}
    lock = host_lock.LOCKS.get(ran)
    off = {d: v for d, v in installed.items() if lock and v and any(
        p.split("==")[0].lower().replace("_", "-") == d and p.split("==")[1] != v.split("+")[0] for p in lock.pins)}
    return {"asked": asked, "ran": ran, "torch_cuda": cuda, "decided": decision.lock, "line": decision.line,
            "installed": installed, "off_the_lock": off, "matches": asked in ("auto", ran)}


def build_model(kind: str, folder: Path) -> Path:
    """A random-weight model from a config, with the tests' byte-level tokenizer: nothing from a hub."""
    import torch

    sys.path.insert(0, str(ROOT / "tests" / "helpers"))
    sys.path.insert(0, str(HERE))
    from tiny import tiny_model, tiny_tokenizer

    tok = tiny_tokenizer()
    if kind == "tiny-llama":
        model = tiny_model(tok)
    else:
        from bench_gpu import random_model_config
        from transformers import AutoModelForCausalLM

        torch.manual_seed(0)
        dtype = torch.bfloat16 if torch.cuda.is_available() and torch.cuda.get_device_capability(0)[0] >= 8 \
            else torch.float16
        model = AutoModelForCausalLM.from_config(random_model_config(tok), dtype=dtype)
        tok.model_max_length = 4096
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def train_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One backend in this process: train, time the steps, read peak memory, compare with the planner."""
    import torch

    sys.path.insert(0, str(HERE))
    from bench_gpu import fixed_length_kwargs, step_figures

    from grpo_fast import models
    from grpo_fast.errors import UserError
    from grpo_fast.models.plan import compare, estimate, plan_input
    from grpo_fast.run.resolve import resolve_config
    from grpo_fast.train import train

    cuda = torch.cuda.is_available()
    overrides = {
        "model": spec["model_dir"], "backend": spec["backend"], "max_steps": spec["steps"],
        "max_completion_length": spec["completion"], "num_generations": spec["generations"],
        "per_device_train_batch_size": spec["generations"], "learning_rate": 1e-3, "logging_steps": 1,
        "save_strategy": "no", "evaluate": False, "eval_rows": 0, "run_dir": spec["run_dir"],
        "generation_kwargs": fixed_length_kwargs(False, spec["completion"]), "rewards": rewards(spec["completion"]),
        "max_prompt_tokens": 1024, "use_vllm": spec.get("use_vllm", False),
        "load_in_4bit": spec.get("load_in_4bit", False),
        "optim": "adamw_torch",  # the GPU profiles pick adamw_8bit, which needs bitsandbytes (not brought along)
        "generation": spec.get("generation", "generate"),
    }
    if cuda:
        overrides["gradient_checkpointing"] = True
    if overrides["use_vllm"]:  # the memory profile's share; the random model is small
        overrides["vllm_gpu_memory_utilization"] = 0.5
    cfg = resolve_config("demo", overrides)
    per_step = cfg.args.per_device_train_batch_size * cfg.args.gradient_accumulation_steps
    card = models.gpu_memory_gb()
    try:
        plan = estimate(plan_input(cfg, spec["model_dir"], card, longest_prompt(cfg, spec["model_dir"])))
    except UserError as err:
        plan = None
        plan_note = err.what
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.time()
    result = train(cfg, force=True)  # random weights: the gold self-test is beside the point
    wall = time.time() - start
    metrics = [json.loads(line) for line in (result.path / "metrics.jsonl").read_text().splitlines()]
    out: dict[str, Any] = {"backend": result.summary["backend"], "wall_s": round(wall, 1),
                           "completions_per_step": per_step,
                           **{k: round(v, 3) for k, v in step_figures(metrics, per_step).items()},
                           "run_dir": str(result.path)}
    if cuda:
        peak = torch.cuda.max_memory_allocated() / 2**30
        out.update(peak_gib=round(peak, 2))
        if plan is not None:
            out.update(plan_gib=round(plan.allocated_gb, 4), plan_error=round(compare(plan, peak), 3))
    else:
        import resource

        out.update(peak_gib=None, peak_note="no CUDA: GPU memory not measured",
                   cpu_max_rss_gib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2))
        if plan is not None:
            out.update(plan_gib=round(plan.allocated_gb, 4))
    if plan is None:
        out["plan_note"] = plan_note
    return out


def longest_prompt(cfg: Any, model_dir: str) -> int:
    """Tokens of the longest prompt with the chat template: what the planner should size activations by."""
    from transformers import AutoTokenizer

    from grpo_fast.recipes import get_recipe

    tok = AutoTokenizer.from_pretrained(model_dir)
    rows = get_recipe(cfg.recipe).rows(cfg)
    texts = [tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]
    return max(len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts)


def run_backend(backend: str, spec: dict[str, Any], role: str = "train") -> dict[str, Any]:
    """A backend in its own process (Unsloth patches transformers on import), or the one-line reason why not.
    ``role``: ``train`` (phase 4, ``train_worker``) or ``tools`` (phase 6, ``tool_worker``)."""
    import torch

    if backend == "unsloth":
        if not torch.cuda.is_available():
            return {"backend": "unsloth", "status": "skipped", "why": "Unsloth needs a CUDA GPU"}
        state = _imports("unsloth")
        if state != "ok":
            return {"backend": "unsloth", "status": "skipped", "why": f"unsloth {state}"}
    start = time.time()
    flag = "--worker" if role == "train" else "--tool-worker"
    proc = subprocess.run([sys.executable, __file__, flag, json.dumps({**spec, "backend": backend})],
                          capture_output=True, text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    found = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if os.environ.get(LOGS_ENV):  # the whole worker log, for a run that cannot be repeated (a lent GPU)
        log = Path(os.environ[LOGS_ENV]) / (f"worker-{backend}.log" if role == "train" else f"tools-{backend}.log")
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr, encoding="utf-8")
    if proc.returncode or not found:
        tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-3:]
        return {"backend": backend, "status": "failed", "why": " | ".join(tail)[-600:],
                "seconds": round(time.time() - start, 1)}
    result = json.loads(found[-1][7:])
    return {"status": result.pop("status", "ok"), **result, "process_s": round(time.time() - start, 1)}


def build_tool_caller(folder: Path) -> dict[str, Any]:
    """The tests' tool-calling Qwen2, trained here (on the GPU when there is one) and saved: no hub."""
    sys.path.insert(0, str(ROOT / "tests" / "helpers"))
    from tool_caller import save_tool_caller

    return {"status": "ok", **save_tool_caller(folder)}


def tool_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One backend in this process: tool_math's GRPO stage through TRL's tool loop with the sandboxed python tool;
    TRL's tool metrics and the kit's python_ran reward, averaged over the steps."""
    from grpo_fast import models

    models.preimport_unsloth(spec["backend"])  # before transformers and trl, as `grpo-fast train` does
    from grpo_fast.recipes.tool_math import ENVIRONMENT
    from grpo_fast.run.resolve import resolve_config
    from grpo_fast.sandbox import isolation_level
    from grpo_fast.train import train

    overrides = {
        "model": spec["model_dir"], "backend": spec["backend"], "environment": ENVIRONMENT,
        "stages": [{"name": "grpo", "max_steps": spec["steps"]}],  # no SFT warm-up: the model already calls
        "num_generations": spec["generations"], "per_device_train_batch_size": spec["generations"],
        "max_completion_length": spec["completion"], "max_tool_calling_iterations": spec["tool_iterations"],
        "logging_steps": 1, "save_strategy": "no", "evaluate": False, "eval_rows": 0, "run_dir": spec["run_dir"],
        "use_vllm": False, "load_in_4bit": False, "optim": "adamw_torch",
    }
    cfg = resolve_config("tool_math", overrides)
    start = time.time()
    result = train(cfg, force=True)
    wall = time.time() - start
    metrics = [json.loads(line) for line in (result.path / "metrics.jsonl").read_text().splitlines()]
    out: dict[str, Any] = {"backend": result.summary["backend"], "wall_s": round(wall, 1), "steps": len(metrics),
                           "sandbox": isolation_level()}
    for name, key in TOOL_METRICS.items():
        values = [m[key] for m in metrics if isinstance(m.get(key), (int, float))]
        out[name] = round(sum(values) / len(values), 3) if values else None
    if not out["call_frequency"]:  # the loop ran but never called a tool: the tool path went unexercised
        out.update(status="failed", why=f"no tool calls in {len(metrics)} steps (tools/call_frequency "
                                        f"{out['call_frequency']}): the tool loop was not exercised")
    return out


def tools_phase(report: dict[str, Any], backends: list[str], work: Path, out: str) -> None:
    """Phase 6: build the tool caller, then a short tool_math GRPO run per backend (the JSON after each)."""
    try:
        model = build_tool_caller(work / "tool-caller")
    except Exception as err:  # a model that did not learn to call is a result to report, not a crash
        model = {"status": "failed", "why": f"{type(err).__name__}: {err}"[:600]}
    report["tools"] = {"model": model, "runs": []}
    write(report, out)
    if model["status"] != "ok":
        return
    spec = {**TOOLS, "model_dir": str(work / "tool-caller")}
    for b in backends:
        report["tools"]["runs"].append(run_backend(b, {**spec, "run_dir": str(work / f"tools-{b}")}, role="tools"))
        write(report, out)


def inference_and_export(run_dir: str, work: Path) -> dict[str, Any]:
    """Chat and generate with the trained adapter; adapter and merged export; GGUF said, not faked."""
    import io

    import torch

    from grpo_fast import export, infer
    from grpo_fast.rundir import Run

    out: dict[str, Any] = {}
    info = Run.open(run_dir, lora=True)
    engine = infer.select_engine("transformers")
    prompts = work / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    records = infer.generate_file(run_dir, prompts, work / "generated.jsonl", engine="transformers",
                                  max_new_tokens=16)
    out["generate"] = {"status": "ok", "engine": engine.name, "records": len(records),
                       "first": repr(records[0]["completion"][:60])}
    gen = infer.Generator(info, engine, max_new_tokens=8)
    turns = infer.chat_loop(gen, ["What is 2 + 2?", "and 3 + 3?", "/exit"], io.StringIO())
    out["chat"] = {"status": "ok", "turns": turns}
    if torch.cuda.is_available() and _imports("vllm") == "ok" and _imports("unsloth") == "ok":
        out["unsloth_engine"] = {"status": "available", "note": "run `grpo-fast chat RUN --engine unsloth`"}
    else:
        out["unsloth_engine"] = {"status": "skipped", "why": "the Unsloth and vLLM engines need vLLM, which is not "
                                                             "installed (its wheel exceeds the 64 MiB allowance)"}
    adapter = export.export_run(run_dir, "adapter", out=work / "export-adapter")
    merged = export.export_run(run_dir, "merged", out=work / "export-merged")
    out["export_adapter"] = {"status": "ok", "files": sorted(p.name for p in adapter.iterdir())}
    same, moved = merged_matches_adapter(info, merged)
    out["export_merged"] = {"status": "ok" if same else "failed", "files": sorted(p.name for p in merged.iterdir()),
                            "greedy_matches_base_plus_adapter": same, "adapter_changed_logits": moved}
    out["export_gguf"] = {"status": "skipped", "why": "GGUF conversion needs llama.cpp, which Unsloth builds from "
                                                      "source over the network: impossible offline, not attempted"}
    return out


def merged_matches_adapter(info: Any, merged: Path) -> tuple[bool, bool]:
    """(greedy tokens of the merged export equal base + adapter's, the adapter changed the base's logits)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_fast.infer import as_messages

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tok = AutoTokenizer.from_pretrained(merged)
    tok.padding_side = "left"
    texts = [tok.apply_chat_template(as_messages(p, None), tokenize=False, add_generation_prompt=True)
             for p in PROMPTS]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
    results, logits = [], []
    for build in (lambda: AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float32),
                  lambda: PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(
                      info.base_model_path(), dtype=torch.float32), str(info.adapter))):
        model = build().to(device).eval()
        with torch.no_grad():
            results.append(model.generate(**enc, max_new_tokens=12, do_sample=False, pad_token_id=tok.pad_token_id))
            logits.append(model(**enc).logits)
            if isinstance(model, PeftModel):
                with model.disable_adapter():
                    logits.append(model(**enc).logits)
        del model
    return bool(torch.equal(results[0], results[1])), not torch.allclose(logits[1], logits[2])


def summary_lines(report: dict[str, Any]) -> list[str]:
    """What the run prints: one line per measured or skipped item."""
    lines = [f"grpo_fast GPU acceptance ({report['mode']} mode): {report['environment'].get('gpu', 'no GPU')}"]
    s = report["setup"]
    lines.append(f"set-up: {s['status']}" + (f", {s.get('size_mib')} MiB of wheels in {s.get('seconds')} s"
                                             if s["status"] != "skipped" else f" ({s['why']})"))
    if "train" not in report:
        lines.append("train: skipped (--no-train: no random model, training or after-training phases)")
    else:
        lines.append(f"{'backend':<34}{'step s':>8}{'gen tok/s':>11}{'peak GiB':>10}{'plan GiB':>10}{'plan err':>10}")
    for r in report.get("train", []):
        if r.get("status") != "ok":
            lines.append(f"{r['backend'] + ' ' + r.get('generation', ''):<34}{r.get('status')}: {r.get('why')}")
            continue
        fmt = lambda v, f: format(v, f) if isinstance(v, (int, float)) else format("-", f">{f.split('.')[0][-2:]}")
        label = f"{r['backend']} {r.get('generation', '')}"
        lines.append(f"{label:<34}{fmt(r['step_s'], '8.2f')}{fmt(r['gen_tok_s'], '11.0f')}"
                     f"{fmt(r.get('peak_gib'), '10.2f')}{fmt(r.get('plan_gib'), '10.2f')}"
                     f"{fmt(r.get('plan_error'), '+10.0%')}")
    for key, value in report.get("after_training", {}).items():
        detail = value.get("why") or ", ".join(f"{k}={v}" for k, v in value.items() if k != "status")
        lines.append(f"{key}: {value['status']}" + (f" ({detail})" if detail else ""))
    lines += tool_lines(report.get("tools"))
    lines.append(f"vllm: {report['vllm']['status']} ({report['vllm']['why']})")
    lines.append(f"total {report['total_s']:.0f} s; JSON: {report['json']}")
    return lines


def tool_lines(tools: dict[str, Any] | None) -> list[str]:
    """The tools phase: the tool caller, then one line per backend."""
    if tools is None:
        return ["tools: skipped (--no-tools)"]
    m = tools["model"]
    if m["status"] != "ok":
        return [f"tool caller: {m['status']} ({m.get('why')})"]
    fp32, bf16 = m["check"], m["check_bf16"]
    lines = [f"tool caller: ok (trained {m['steps']} steps on {m['device']} in {m['seconds']} s, loss {m['loss']}; "
             f"greedy calls {fp32['calls']}/{fp32['rows']}, bf16 {bf16['calls']}/{bf16['rows']}; "
             f"sampled call p={fp32['p_call']}, bf16 {bf16['p_call']})"]
    for r in tools["runs"]:
        head = f"tools {r['backend']:<13}{r['status']}"
        if "call_frequency" not in r:
            lines.append(f"{head}: {r.get('why')}")
            continue
        lines.append(f"{head} ({r['wall_s']} s, {r['steps']} steps: call_frequency={r['call_frequency']}, "
                     f"failure_frequency={r['failure_frequency']}, python_ran={r['python_ran']}, "
                     f"sandbox={r['sandbox']})" + (f": {r['why']}" if r.get("why") else ""))
    return lines


def write(report: dict[str, Any], out: str) -> None:
    Path(out).write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")


# Phase 4b, the default path on a T4 or a 24 GB card (the memory profile): Unsloth with 4-bit base weights, then
# the same with vLLM generating from 4-bit weights (bitsandbytes inside vLLM: the lock's vllm-bnb-plugin).
QUANTIZED = (("4-bit", {"load_in_4bit": True}), ("4-bit + vLLM", {"load_in_4bit": True, "use_vllm": True}))


def quantized_skip(extra: dict[str, Any]) -> str | None:
    """Why a 4-bit run cannot start here (one line), or None."""
    if _imports("bitsandbytes") != "ok":
        return f"bitsandbytes {_imports('bitsandbytes')} (4-bit weights need it)"
    if extra.get("use_vllm"):
        if _imports("vllm") != "ok":
            return f"vllm {_imports('vllm')} on this device"
        if _imports("vllm_bnb_plugin") != "ok":
            return "vllm-bnb-plugin not installed: vLLM >= 0.28 has no bitsandbytes of its own"
    return None


def train_phases(report: dict[str, Any], shape: dict[str, Any], backends: list[str], work: Path, out: str,
                 engines: tuple[str, ...] = ("generate",)) -> None:
    """Phases 3-5: the random model, the same GRPO config per backend (and per generation engine on
    transformers), then inference and export."""
    t0 = time.time()
    model_dir = build_model(shape["model"], work / "model")
    report["model"] = {"kind": shape["model"], "built_s": round(time.time() - t0, 1),
                       "note": "random weights from a config; speed and memory do not depend on the values"}
    spec = {**shape, "model_dir": str(model_dir)}
    report["train"] = []
    runs = [(b, "generate") for b in backends] + [("transformers", e) for e in engines if e != "generate"]
    for b, engine in runs:  # the other generation engines (bench_generation.py's) side by side on transformers
        result = run_backend(b, {**spec, "generation": engine, "run_dir": str(work / f"run-{b}-{engine}")})
        report["train"].append({**result, "generation": engine})
        write(report, out)  # what is known so far survives a run stopped at its time limit
    for label, extra in QUANTIZED:  # the memory profile's path: 4-bit LoRA on Unsloth, then 4-bit inside vLLM
        why = quantized_skip(extra)
        result = ({"backend": "unsloth", "status": "skipped", "why": why} if why and "unsloth" in backends else
                  run_backend("unsloth", {**spec, **extra, "run_dir": str(work / f"run-unsloth-{label}")})
                  if "unsloth" in backends else {"backend": "unsloth", "status": "skipped", "why": "not asked"})
        report["train"].append({**result, "generation": label})
        write(report, out)
    trained = next((r for r in reversed(report["train"]) if r.get("status") == "ok"
                    and r["generation"] == "generate"), None)
    if trained:
        report["after_training"] = {"of": {"status": "ok", "backend": trained["backend"]},
                                    **inference_and_export(trained["run_dir"], work)}
    else:
        report["after_training"] = {"of": {"status": "skipped", "why": "no backend trained"}}
    for r in report["train"]:
        r.pop("run_dir", None)
    write(report, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", default=None, help="folder of extra wheels to install offline first")
    parser.add_argument("--out", default="gpu_acceptance.json", help="the JSON report")
    parser.add_argument("--reduced", action="store_true", help="tiny model, 2 short steps (automatic without CUDA)")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps per backend")
    parser.add_argument("--backends", default="transformers,unsloth", help="which backends to train, comma-separated")
    parser.add_argument("--engines", default="generate,static_cache,continuous_batching",
                        help="generation engines trained on the transformers backend (the `generation` key)")
    parser.add_argument("--train", action=argparse.BooleanOptionalAction, default=True,
                        help="phases 3-5: the random model, training per backend, after training (default: on)")
    parser.add_argument("--tools", action=argparse.BooleanOptionalAction, default=True,
                        help="phase 6: a tool-calling model through TRL's tool loop on each backend (default: on)")
    parser.add_argument("--lock", choices=["auto", "cu13", "cu12", "cpu"], default="auto",
                        help="the lock installed here (requirements-gpu.txt: cu13, requirements-gpu-cu12.txt: cu12); "
                             "recorded, and checked against the installed torch before anything runs")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--tool-worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(train_worker(json.loads(args.worker))), flush=True)
        return 0
    if args.tool_worker:
        print("RESULT " + json.dumps(tool_worker(json.loads(args.tool_worker))), flush=True)
        return 0
    start = time.time()
    report: dict[str, Any] = {"setup": setup(args.wheels)}
    report["lock"] = lock_report(args.lock)
    if not report["lock"]["matches"]:
        print(f"--lock {args.lock}, but the installed torch is {report['lock']['ran']}'s (torch "
              f"{report['lock']['installed']['torch']}): install {args.lock}'s requirements, or pass --lock auto",
              file=sys.stderr)
        return 2
    print(f"lock: {report['lock']['ran']} ran; {report['lock']['line']}", flush=True)
    import torch

    reduced = args.reduced or not torch.cuda.is_available()
    shape = dict(REDUCED if reduced else FULL)
    if args.steps:
        shape["steps"] = args.steps
    report.update(mode="reduced" if reduced else "full", config=shape, environment=environment())
    backends = args.backends.split(",")
    with tempfile.TemporaryDirectory(prefix="gpu-acceptance-") as tmp:
        work = Path(tmp)
        if args.train:
            train_phases(report, shape, backends, work, args.out, tuple(args.engines.split(",")))
        if args.tools:
            tools_phase(report, backends, work, args.out)
    report["vllm"] = {"status": "skipped" if _imports("vllm") != "ok" else "see the 4-bit + vLLM row",
                      "why": "vllm is not installed here (a 311 MB wheel; the allowance is 64 MiB); make test-vllm "
                             "runs vLLM's CPU build for correctness" if _imports("vllm") != "ok" else
                             "Unsloth's fast_inference with 4-bit weights"}
    report["total_s"] = round(time.time() - start, 1)
    report["json"] = str(Path(args.out).resolve())
    write(report, args.out)
    print("\n".join(summary_lines(report)), flush=True)
    failed = [r for r in report.get("train", []) if r.get("status") == "failed"]
    failed += [v for v in report.get("after_training", {}).values() if v.get("status") == "failed"]
    if "tools" in report:
        failed += [r for r in [report["tools"]["model"], *report["tools"]["runs"]] if r.get("status") == "failed"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
