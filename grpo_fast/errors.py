"""One exception type for mistakes a user can fix; the CLI turns it into one message and exit code 2."""

from __future__ import annotations


class UserError(Exception):
    """A problem in the user's input: says what is wrong, where, and how to fix it.

    Raised anywhere in the kit; ``grpo_fast.cli`` prints ``str(err)`` without a traceback and exits 2.
    """

    def __init__(self, what: str, where: str | None = None, fix: str | None = None):
        self.what, self.where, self.fix = what, where, fix
        parts = [f"error: {what}"]
        if where:
            parts.append(f"  where: {where}")
        if fix:
            parts.append(f"  fix: {fix}")
        super().__init__("\n".join(parts))
