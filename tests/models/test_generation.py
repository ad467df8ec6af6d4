"""The ``generation`` key on the kit's real GRPOTrainer (TRL 1.14.2): every engine is really used, samples the
same distribution as TRL's default path (same greedy tokens), and the choice is printed with its reason."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

from grpo_fast.models import VLLM_CPU_ENV, generation, load_model
from grpo_fast.models import machine as machine_facts
from grpo_fast.models.generation import VLLM_MIN_COMPLETION, choose_engine, vllm_choice
from grpo_fast.run.prepare import prepare
from grpo_fast.run.resolve import resolve_config
from grpo_fast.run.stages import build_trainer

PROMPTS = [[{"role": "user", "content": "What is 3 + 4?"}], [{"role": "user", "content": "Name a colour."}]]


def _trainer(tiny_model_dir, tmp_path, *overrides):
    cfg = resolve_config("demo", [f"model={tiny_model_dir}", "profile=cpu", "cpu_threads=1",
                                  "cpu_autocast_training=false", f"run_dir={tmp_path / 'run'}", *overrides])
    loaded = load_model(cfg)
    trainer, record = build_trainer(prepare(cfg), loaded, tmp_path / "run")
    return trainer, record


def _greedy(trainer, tokens=12):
    import torch

    tok = trainer.processing_class
    ids = [list(tok.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])
           for p in PROMPTS]
    trainer.generation_config.do_sample = False
    trainer.generation_kwargs["do_sample"] = False
    trainer.generation_config.max_new_tokens = trainer.generation_kwargs["max_new_tokens"] = tokens
    trainer.generation_config.eos_token_id = trainer.generation_kwargs["eos_token_id"] = None  # full length
    trainer.model.eval()
    with torch.no_grad():
        completions, _ = trainer._generate_single_turn(ids, None, {}, 1)
    return [list(c) for c in completions]


@pytest.fixture(scope="module")
def reference(tiny_model_dir, tmp_path_factory):
    trainer, _ = _trainer(tiny_model_dir, tmp_path_factory.mktemp("plain"), "generation=generate",
                          "shared_prefill=false", "merged_generation=false")
    return _greedy(trainer)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["static_cache", "continuous_batching"])
def test_each_engine_runs_and_gives_the_default_paths_tokens(engine, tiny_model_dir, tmp_path, reference, capsys,
                                                             monkeypatch):
    trainer, record = _trainer(tiny_model_dir, tmp_path, f"generation={engine}")
    assert f"generation engine: {engine} — set in the config" in capsys.readouterr().out
    assert {"key": "generation", "value": engine} in [{k: c[k] for k in ("key", "value")} for c in record["choices"]]
    calls = []
    if engine == "continuous_batching":  # TRL's continuous-batching branch calls generate_batch, never generate
        original = type(trainer.model.base_model.model).generate_batch
        monkeypatch.setattr(type(trainer.model.base_model.model), "generate_batch",
                            lambda *a, **k: calls.append(engine) or original(*a, **k))
    else:
        assert trainer.generation_config.cache_implementation == "static"
        import transformers

        original_init = transformers.StaticCache.__init__
        monkeypatch.setattr(transformers.StaticCache, "__init__",
                            lambda self, *a, **k: calls.append(engine) or original_init(self, *a, **k))
    assert _greedy(trainer) == reference
    assert calls  # the engine really generated


def test_auto_says_why_and_leaves_vllm_alone(tiny_model_dir, tmp_path, capsys):
    trainer, record = _trainer(tiny_model_dir, tmp_path)  # generation: auto (the kit's default)
    out = capsys.readouterr().out
    assert "generation engine: generate — measured fastest on CPU" in out
    assert trainer.generation_config.cache_implementation is None and not trainer.use_transformers_continuous_batching
    vllm = resolve_config("demo", ["use_vllm=true", "vllm_mode=colocate"])
    assert choose_engine(vllm, cuda=True).value is None and "vLLM" in choose_engine(vllm, cuda=True).why
    through_trl = resolve_config("demo", ["use_transformers_continuous_batching=true"])
    assert choose_engine(through_trl, cuda=False).value == "continuous_batching"


def test_auto_turns_colocated_vllm_on_only_where_it_measured_faster():
    long = f"max_completion_length={VLLM_MIN_COMPLETION}"
    here = {"cuda": False, "vllm": True, "native_bf16": True}
    on, why = vllm_choice(resolve_config("code", ["profile=cpu", long]), **here)
    assert on and "importance-sampling correction" in why and "bench_generation" in why
    refused = {  # each condition alone keeps the transformers engines, with its reason
        "no vLLM": (resolve_config("code", ["profile=cpu", long]), {**here, "vllm": False}, "not installed"),
        "emulated bf16": (resolve_config("code", ["profile=cpu", long]), {**here, "native_bf16": False}, "bf16"),
        "a GPU": (resolve_config("code", ["profile=cpu", long]), {**here, "cuda": True}, "GPU"),
        "short": (resolve_config("code", ["profile=cpu", f"max_completion_length={VLLM_MIN_COMPLETION - 1}"]), here,
                  "completions under"),
        "full weights": (resolve_config("code", ["profile=cpu", long, "lora=false"]), here, "LoRA"),
        "engine set": (resolve_config("code", ["profile=cpu", long, "generation=generate"]), here, "generation:"),
        "user's use_vllm": (resolve_config("code", ["profile=cpu", long, "use_vllm=false"]), here, "use_vllm"),
        "server mode": (resolve_config("code", ["profile=cpu", long, "vllm_mode=server"]), here, "vllm_mode"),
    }
    for case, (cfg, facts, reason) in refused.items():
        on, why = vllm_choice(cfg, **facts)
        assert not on and reason in why, (case, why)


class _Cpu:
    def __init__(self, native_bf16: bool):
        self.native_bf16 = native_bf16


# Written out by hand, not computed by the code under test: each machine and whether auto turns vLLM on there
PICKS = [
    ({"cuda": False, "vllm": True, "native_bf16": True}, True),
    ({"cuda": False, "vllm": False, "native_bf16": True}, False),  # not installed
    ({"cuda": False, "vllm": True, "native_bf16": False}, False),  # emulated bf16: never measured
    ({"cuda": True, "vllm": True, "native_bf16": True}, False),  # a GPU: the profile decides
]


@pytest.mark.parametrize(("machine", "expected"), PICKS)
def test_pick_vllm_on_each_machine(machine, expected, monkeypatch):
    """pick_vllm reads this machine's facts itself: each one is set here, so every machine's answer is checked."""
    monkeypatch.setenv(VLLM_CPU_ENV, "0")  # restored after the test: pick_vllm sets it
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: (object() if machine["vllm"] else None)
                        if name == "vllm" else real_find_spec(name, *a))
    monkeypatch.setattr(machine_facts, "cuda_available", lambda: machine["cuda"])
    monkeypatch.setattr(generation, "cpu_class", lambda: _Cpu(machine["native_bf16"]))
    cfg = resolve_config("code", ["profile=cpu", f"max_completion_length={generation.VLLM_MIN_COMPLETION}"])
    assert generation.pick_vllm(cfg) is expected
    assert bool(cfg.args.use_vllm) is expected and (os.environ[VLLM_CPU_ENV] == "1") is expected
    picked = [n for n in cfg.notes if n.startswith("use_vllm=True: generation: auto")]
    assert len(picked) == int(expected), cfg.notes
    if expected:  # the run says where the figure came from, and that it was not this machine
        assert cfg.args.vllm_mode == "colocate"
        assert "bench_generation_cpu_code_vllm_colocate.json" in picked[0] and "not on this machine" in picked[0]
        assert not generation.pick_vllm(cfg)  # once: use_vllm is on now


BENCH = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["VLLM_LONG", "VLLM_SHORT_RUN"])
def test_the_vllm_figures_are_the_committed_benchmarks(name):
    """Each figure auto quotes, recomputed from its benchmark JSON: the ratio, rounds, shape, length, date, load."""
    figure = getattr(generation, name)
    data = json.loads((BENCH / figure.file).read_text())
    (result,) = data["results"].values()
    engines = result["engines"]
    assert figure.ratio == round(engines["vllm_colocate"]["steps_per_s"] / engines["trl"]["steps_per_s"], 2)
    rows, tokens = (int(n) for n in re.match(r"(\d+) x (\d+) tokens", result["shape"]).groups())
    assert (figure.rows, figure.max_tokens, figure.rounds) == (rows, tokens, data["rounds"])
    assert figure.fixed_length is bool(data.get("fixed_length"))
    assert figure.tokens_each == round(engines["vllm_colocate"]["tokens"] / rows, 1)
    assert figure.date == data["date"]
    loads = [float(x) for x in (data["machine"]["load"] + " " + data["load_after"]).split()]
    assert figure.load == (round(min(loads), 1), round(max(loads), 1))
    assert f"{data['machine']['cores']}-core" in figure.machine and "Xeon" in data["machine"]["cpu"]
    assert f"{figure.ratio:.2f}x" in figure.said() and figure.file in figure.said()
    assert generation.VLLM_MIN_COMPLETION == generation.VLLM_LONG.max_tokens
