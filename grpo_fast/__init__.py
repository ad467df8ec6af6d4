"""grpo_fast: an Unsloth-first, single-GPU GRPO training kit on TRL.

Data flow: data -> rewards -> models -> train -> evaluate -> export.
Heavy imports (torch, trl) happen inside the modules that need them, so ``import grpo_fast`` is cheap.
"""

__version__ = "0.1.0"
