"""Math-verify worker process: reads ``[id, gold, pred]`` JSON lines on stdin, writes ``[id, result]`` lines.

Run as a script (not ``-m``) so it imports only math_verify, never the rest of the kit. ``result`` is 1.0/0.0,
or null when the gold answer cannot be parsed. math-verify's own signal timeouts are disabled (None): the
parent enforces a per-item deadline by killing this process, which works from any thread.
"""

from __future__ import annotations

import json
import logging
import re
import resource
import sys
from functools import lru_cache

# Braced groups first (\\text{square units}, \\begin{pmatrix}): a bare-command match would leave their words behind
_LATEX_WORDS = re.compile(r"\\(?:text\w*|mbox|math\w+|operatorname|begin|end)\s*\{[^{}]*\}|\\[A-Za-z]+")
_FUNCTIONS = {"sin", "cos", "tan", "cot", "sec", "csc", "log", "exp", "sqrt", "arcsin", "arccos", "arctan", "sinh",
              "cosh", "tanh", "max", "min", "gcd", "lcm", "mod", "det", "inf", "infty", "pi", "deg"}


def _prose(text: str) -> bool:
    """Undelimited text with no digit and two or more words of three letters or more outside LaTeX commands and
    text groups (function names aside): "Answer is forty two." Delimited LaTeX (``$``, ``\\(``, ``\\boxed``) and
    text with a number ("The answer is 42") are left to math-verify's extraction."""
    if "$" in text or "\\boxed" in text or "\\(" in text or any(c.isdigit() for c in text):
        return False
    found = [w for w in re.findall(r"[A-Za-z]{3,}", _LATEX_WORDS.sub(" ", text)) if w.lower() not in _FUNCTIONS]
    return len(found) >= 2


def _limit_memory(mb: int) -> None:
    try:
        resource.setrlimit(resource.RLIMIT_AS, (mb * 1024 * 1024, mb * 1024 * 1024))
    except (ImportError, ValueError, OSError):
        pass


def main() -> None:
    mem_mb = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if mem_mb > 0:
        _limit_memory(mem_mb)
    logging.disable(logging.CRITICAL)  # math-verify warns about disabled timeouts on every process
    from math_verify import parse, verify

    def _parse(text: str) -> list:
        if not text.strip():
            return []
        wrapped = text if ("$" in text or "\\boxed" in text or "\\(" in text) else f"${text}$"
        return parse(wrapped, parsing_timeout=None) or parse(text, parsing_timeout=None)

    def _gold(text: str) -> list:
        """A gold answer written in prose ("Answer is forty two.") cannot be compared: wrapped as maths it would
        parse as a product of letters, so every completion scored 0; unparsable, the row is not applicable."""
        return [] if _prose(text) else _parse(text)

    parse_gold = lru_cache(maxsize=4096)(_gold)

    out = sys.stdout
    out.write('["ready", null]\n')
    out.flush()
    for line in sys.stdin:
        try:
            item_id, gold, pred = json.loads(line)
            g = parse_gold(gold)
            if not g:
                result = None
            else:
                p = _parse(pred)
                result = 1.0 if p and verify(g, p, timeout_seconds=None) else 0.0
        except Exception:  # noqa: BLE001 - a parse failure is a wrong answer, never a crash
            item_id, result = (locals().get("item_id"), 0.0)
        out.write(json.dumps([item_id, result]) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
