"""Unsloth patches transformers, trl and peft when it is imported, so it must come first (it warns otherwise).

The real ``grpo-fast train`` entry point runs in a fresh interpreter with two stand-ins on PYTHONPATH: a
``sitecustomize`` that makes torch report a CUDA GPU (the only case where the kit imports Unsloth) and an
``unsloth`` package that records which of transformers, trl and peft were already loaded when it was imported,
then gives the real CUDA answer back so the run goes on as the CPU run it is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SITECUSTOMIZE = """
import torch

torch.cuda.real_is_available = torch.cuda.is_available
torch.cuda.is_available = lambda: True
"""

UNSLOTH = """
import json, os, sys

import torch

loaded = sorted(m for m in ("transformers", "trl", "peft", "rouge_score") if m in sys.modules)
with open(os.environ["UNSLOTH_STANDIN_LOG"], "a") as log:
    log.write(json.dumps(loaded) + "\\n")
torch.cuda.is_available = torch.cuda.real_is_available
"""


def _stand_ins(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "unsloth").mkdir()
    (tmp_path / "unsloth" / "__init__.py").write_text(UNSLOTH)
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "imported.jsonl"
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
            "UNSLOTH_STANDIN_LOG": str(log)}


@pytest.mark.slow
def test_train_imports_unsloth_before_transformers_trl_and_peft(tmp_path):
    env = _stand_ins(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "grpo_fast", "train", "demo", "--dry-run"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "dry run: every check passed" in proc.stdout
    records = [json.loads(line) for line in Path(env["UNSLOTH_STANDIN_LOG"]).read_text().splitlines()]
    assert records == [[]]  # imported once, before any of them (and before the recipes' own dependencies)


def test_summarization_dependency_loads_with_its_reward():
    """rouge-score loads when a ROUGE reward first scores, not when the kit or its presets are imported."""
    code = ("import sys; from grpo_fast.rewards.presets import PRESETS; import grpo_fast.train; "
            "print('rouge_score' in sys.modules); "
            "from grpo_fast.rewards.correctness import make_rouge_reward; "
            "r = make_rouge_reward(); print('rouge_score' in sys.modules); "
            "print(r(prompts=['p'], completions=['the cat sat'], summary=['the cat sat'])); "
            "print('rouge_score' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["False", "False", "[1.0]", "True"]
