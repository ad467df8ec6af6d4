"""The judge<->program verdict protocol, lowest first: ``wire``, ``encoder``, ``decoder``, ``channel``, ``mutables``,
``scratch``, ``script``, ``lent``, ``program_state``, ``runner`` (the candidate's side), ``proxy``, ``connection``,
``shared_state``, ``pytest_run``, ``judge`` (the judge's side), ``stdio`` (stdin tests, judged outside the program).

Empty on purpose: the zygote imports these modules one by one, and nothing more.
"""
