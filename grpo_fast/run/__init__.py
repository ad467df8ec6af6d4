"""The run: its configuration resolved (resolve), everything before weights (prepare), one training stage
(stages) and what it hooks into TRL (callbacks), checkpoints a resume can trust, and the programs
``rewards check --programs`` reads (programs)."""
