"""The run configuration: one typed source of truth for every key at every depth.

A one-way stack, lowest first; each module imports only modules above it in this list:

* ``locations`` -- where each value came from (file:line, command line, profile), and key paths as text.
* ``references`` -- references to user code in a config (``file.py:function``, ``pkg.module:Class``).
* ``grpo_args`` -- the GRPO half: TRL's own ``GRPOConfig`` as schema and validator, and the arguments handed to
  it with every default Unsloth rewrites pinned (``trainer_args``).
* ``schema`` -- the kit's half: ``RunConfig`` and its sections, each key documented where it is declared.
* ``build`` -- layers merged and validated at every depth, each error located at its key and file:line.
"""

from grpo_fast.config.build import build_config, validate
from grpo_fast.config.schema import KIT_KEYS, KIT_LAYERS, AlarmKind, HealthSettings, RewardSpec, RunConfig, Stage

__all__ = ["KIT_KEYS", "KIT_LAYERS", "AlarmKind", "HealthSettings", "RewardSpec", "RunConfig", "Stage",
           "build_config", "validate"]
