"""The host's isolation mechanisms, one file each, lowest first: ``limits``, ``cgroups``, ``userns``, ``landlock``,
``namespaces``, ``mounts``, ``kernel``, ``cleanup``, ``memory``, ``probe``. Which of them a job gets is its
``policy.Policy``.

Empty on purpose: the zygote imports these modules one by one, and nothing more.
"""
