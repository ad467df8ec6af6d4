"""The warm pool, lowest first: ``warmup``, ``contain`` (the containment steps per role), ``aftercare``,
``template`` (a slot's template, set up once), ``forker`` (its serving loop), ``compiled`` (test sets remembered),
``jobs`` (a job as tracked, and its result), ``zygote``, ``startup`` (run first in the ``python -I -S`` process).

Empty on purpose: the zygote imports these modules one by one, and nothing more.
"""
