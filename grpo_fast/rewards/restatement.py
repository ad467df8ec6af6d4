"""The question's own expression handed back unevaluated: the one case where an equivalent answer earns nothing.

math-verify rightly calls ``\\sqrt{45}`` equal to the gold ``3\\sqrt{5}``, so "Simplify $\\sqrt{45}$" answered
``\\sqrt{45}`` was paid in full (a 135M model learned exactly that echo). The rule is narrow on purpose, because a
right answer must never lose its marks. An answer the verifier calls right scores 0 only when all of these hold:

1. the question asks to evaluate or simplify an expression: a trigger (``simplify``, ``evaluate``, ``compute``,
   ``calculate``, ``work out``, ``find``, ``determine``, ``reduce``, ``expand``, ``factor``, ``rationalize``,
   ``solve``, ``what is``, ``how much is``, ``what does``; filler such as ``the value of`` between) right before it,
   and the request ending right after it (``.``, ``?``, ``!``, ``;``, ``,``, a line break, the end, ``= ?``,
   ``equal (to)?``, ``completely``, ``in lowest terms``, ``in simplest form``, ``as a decimal``/``integer``/
   ``percentage``); or
   ``express``/``write``/``convert``/``give`` before it with ``in lowest terms``/``as a decimal`` after it; or
   ``= ?`` after it;
2. the answer is that expression whole, compared after ``_canonical`` respells both (not a part of it: "What is
   $\\frac{3}{4} \\cdot 1$?" answered ``3/4`` keeps its marks);
3. the answer has an operation in it (an operator, ``!``, a root or a LaTeX command such as ``\\binom``; a number
   never restates), and is not the gold spelled another way;
4. the question does not offer it as an alternative: joined to another piece of maths by ``or``, ``and``, ``vs``,
   a comma or a semicolon ("Which is larger, 3/4 or 2/3?"), whatever the gold's spelling;
5. it is not already in final form (``p/q`` in lowest terms, ``k√n/q`` with ``n`` square-free), unless the
   question asks for a decimal, an integer or a percentage: simplifying such a form gives it back.
"""

from __future__ import annotations

import math
import re
from typing import Any

from grpo_fast.rewards.answers import MAX_ANSWER_CHARS

# Spelling differences that are not differences: delimiters, spacing commands, multiplication and division signs
_DROP = re.compile(r"\\(?:left|right|displaystyle|textstyle|quad|qquad)(?![A-Za-z])|\\[,;:! ]|\\[()\[\]]|\$|\s")
_SIGNS = (("\\cdot", "*"), ("\\times", "*"), ("\\ast", "*"), ("\\div", "/"), ("**", "^"), ("×", "*"), ("·", "*"),
          ("⋅", "*"), ("∗", "*"), ("÷", "/"), ("−", "-"), ("{,}", ""), ("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"),
          ("\\cfrac", "\\frac"), ("\\dbinom", "\\binom"), ("\\tbinom", "\\binom"))
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# (10) or (sqrt(8)) alone, not f(10) nor 2(3)
_ATOM = re.compile(r"(?<![\w.)])\(([A-Za-z0-9.]+|\d*\*?sqrt\([^()]*\))\)(?![\w.(])")
_OPERATION = re.compile(r"[+*/^=<>!]|sqrt|\\[A-Za-z]+|(?<=[\w)])-")  # a command: \binom, \log, ...
_REDUCED = re.compile(r"-?\(?-?(\d+)\)?/(\d+)")
_SURD = re.compile(r"-?(\d*)\*?sqrt\((\d+)\)(?:/(\d+))?")


def _group(text: str, at: int, number: bool = False) -> tuple[str, int]:
    """The argument of ``\\frac``, ``\\sqrt`` or ``√`` starting at ``at``: a braced or parenthesised group (its
    inside), else a whole number after ``√`` or ``sqrt`` (``number``), else one character (LaTeX's ``\\sqrt2``);
    and where it ends."""
    if at >= len(text):
        return "", at
    close = {"{": "}", "(": ")"}.get(text[at])
    if close is None:
        digits = re.match(r"\d+(?:\.\d+)?", text[at:]) if number else None
        end = at + (len(digits.group()) if digits else 1)
        return text[at:end], end
    depth = 0
    for i in range(at, len(text)):
        depth += {text[at]: 1, close: -1}.get(text[i], 0)
        if depth == 0:
            return text[at + 1:i], i + 1
    return text[at + 1:], len(text)


def _commands(text: str) -> str:
    """``\\frac{a}{b}`` (and ``\\frac12``) as ``(a)/(b)``; ``\\sqrt{x}``, ``\\sqrt2``, ``√x``, ``sqrt(x)`` as
    ``sqrt(x)``; the insides spelled the same way."""
    out, i = [], 0
    while i < len(text):
        for name in ("\\frac", "\\sqrt", "√", "sqrt"):
            if text.startswith(name, i) and not (name == "sqrt" and i and text[i - 1] == "\\"):
                break
        else:
            out.append(text[i])
            i += 1
            continue
        i += len(name)
        if name == "\\frac":
            top, i = _group(text, i)
            bottom, i = _group(text, i)
            out.append(f"({_commands(top)})/({_commands(bottom)})")
        else:
            index = ""
            if name == "\\sqrt" and text.startswith("[", i):  # \sqrt[3]{x}
                end = text.find("]", i)
                index, i = (text[i + 1:end], end + 1) if end > 0 else ("", i)
            inside, i = _group(text, i, number=name != "\\sqrt")
            out.append(f"sqrt{'[' + index + ']' if index else ''}({_commands(inside)})")
    return "".join(out)


def _canonical(text: str) -> str:
    """An expression spelled one way: ``$``, spaces and spacing commands gone; ``\\cdot``, ``\\times``, ``×`` as
    ``*``; ``\\dfrac``/``\\frac``/``a/b`` alike; ``\\sqrt2``/``\\sqrt{2}``/``√2``/``sqrt(2)`` alike; ``^{10}`` as
    ``^10``; ``**`` as ``^``; thousands separators and a closing full stop dropped."""
    text = _DROP.sub("", text)
    for spelled, as_ in _SIGNS:
        text = text.replace(spelled, as_)
    text = _commands(_THOUSANDS.sub("", text)).replace("{", "(").replace("}", ")")
    while True:
        unwrapped = _ATOM.sub(r"\1", text)
        if unwrapped == text:
            return _unwrap(text.rstrip(".,;:?").lstrip("="))  # "!" stays: 5! is a factorial
        text = unwrapped


def _unwrap(text: str) -> str:
    """``(3/4)`` as ``3/4``: parentheses around the whole expression, unless they hold a tuple or an interval."""
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, char in enumerate(text):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0 and i < len(text) - 1:
                return text  # "(1+2)*(3+4)": the first group closes early
            if depth == 1 and char == ",":
                return text
        text = text[1:-1]
    return text


def _square_free(n: int) -> bool:
    return n > 1 and all(n % (k * k) for k in range(2, math.isqrt(n) + 1))


def final_form(expr: str) -> bool:
    """A canonical expression that simplifying gives back: ``p/q`` in lowest terms, ``k*sqrt(n)/q`` with ``n``
    square-free and ``k/q`` in lowest terms."""
    fraction = _REDUCED.fullmatch(expr)
    if fraction:
        top, bottom = int(fraction[1]), int(fraction[2])
        return bottom > 1 and math.gcd(top, bottom) == 1
    surd = _SURD.fullmatch(expr)
    if surd:
        coefficient, bottom = int(surd[1] or 1), int(surd[3] or 1)
        return _square_free(int(surd[2])) and coefficient > 0 and bottom > 0 and math.gcd(coefficient, bottom) == 1
    return False


# The question's maths: LaTeX spans, and plain runs of numbers, single letters, operators, parentheses and commands
_LATEX = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
_TOKEN = re.compile(r"[ \t]+|\d+(?:,\d{3})*(?:\.\d+)?|\.\d+|\\[A-Za-z]+|sqrt|(?<![A-Za-z])[A-Za-z](?![A-Za-z])|"
                    r"\*\*|[-+*/^×÷·−√(){}]|(?<=[\d)])!")
_OPERATOR_WORDS = ("\\cdot", "\\times", "\\div", "\\ast", "\\pm", "sqrt", "\\sqrt", "\\frac", "\\dfrac")
_FILLER = (r"(?:\s+(?:the|an?|exact|numerical|numeric|simplified|value|result|expression|number|fraction|quantity|"
           r"product|sum|quotient|difference|following|denominator|of))*\s*:?\s*$")
_TRIGGER = re.compile(r"\b(?:simplify|evaluate|compute|calculate|work\s+out|find|determine|reduce|expand|factori[sz]e"
                      r"|factor|rationali[sz]e|solve|what\s+is|what's|whats|how\s+much\s+is|what\s+does)" + _FILLER,
                      re.I)
_FORM_TRIGGER = re.compile(r"\b(?:express|write|rewrite|convert|put|give)" + _FILLER, re.I)  # with a form only
_SIMPLEST = r"(?:to|in)\s+(?:its\s+)?(?:lowest\s+terms|simplest(?:\s+radical)?\s+form)"
_AS_NUMBER = r",?\s*(?:as|to|in|into)\s+(?:an?\s+)?(?:decimal|whole\s+number|integer|percent(?:age)?)(?:\s+form)?\b"
_FORM_ENDS = re.compile(rf"\s*(?:{_SIMPLEST}|{_AS_NUMBER})", re.I)
_NUMBER_WANTED = re.compile(rf"\s*{_AS_NUMBER}", re.I)
_REQUEST_ENDS = re.compile(rf"[ \t]*[\n.?!;,]|\s*$|\s*(?:=\s*\?|(?:equal(?:\s+to)?|come\s+to)\s*\?|completely\b|"
                           rf"fully\b|exactly\b|{_SIMPLEST}|{_AS_NUMBER})", re.I)
_EQUALS_WHAT = re.compile(r"\s*=\s*\?")
_LONGEST = 2 * MAX_ANSWER_CHARS  # characters of one piece of maths: twice the longest answer the judge reads
_LIST_JOIN = re.compile(r"\s*(?:,|;|,?\s*\b(?:or|and|vs\.?|versus)\b)\s*(?:\([a-eA-E]\)|[a-eA-E]\))?\s*", re.I)


def _operand(token: str, end: bool) -> bool:
    """The token can end (``end``) or start an operand: a space beside it separates two pieces of maths."""
    if token in _OPERATOR_WORDS:
        return False
    edge = token[-1] if end else token[0]
    return edge.isalnum() or edge in (")}" if end else "({√\\")


def _plain_runs(text: str, lo: int, hi: int) -> list[tuple[int, int, str]]:
    """Maths written without delimiters in ``text[lo:hi]``: runs of tokens, where a space between two operands
    ("is a 3/4 share") ends a run but a space beside an operator ("17 * 23") does not."""
    runs: list[tuple[int, int]] = []
    start: int | None = None
    end, prev, pos = lo, "", lo
    while pos < hi:
        token = _TOKEN.match(text, pos, hi)
        if token is None or (start is not None and pos > end and not token.group().isspace()
                             and _operand(prev, end=True) and _operand(token.group(), end=False)):
            if start is not None:
                runs.append((start, end))
                start = None
            if token is None:
                pos += 1
                continue
        if not token.group().isspace():
            start = pos if start is None else start
            end, prev = token.end(), token.group()
        pos = token.end()
    if start is not None:
        runs.append((start, end))
    return [(s, e, text[s:e]) for s, e in runs if re.search(r"[\dA-Za-z]", text[s:e])]


def _maths(question: str) -> list[tuple[int, int, str]]:
    """Each piece of maths in the question in order: (start, end, canonical spelling)."""
    found = [(m.start(), m.end(), next(g for g in m.groups() if g is not None)) for m in _LATEX.finditer(question)]
    plain, last = [], 0
    for start, end, _ in [*found, (len(question), len(question), "")]:
        plain += _plain_runs(question, last, start)
        last = end
    # a piece far longer than any answer cannot be one: not respelled (bounded work on a hostile prompt)
    return sorted((start, end, _canonical(text) if len(text) <= _LONGEST else "") for start, end, text in found + plain)


def _alternative(question: str, pieces: list[tuple[int, int, str]], i: int) -> bool:
    """Piece ``i`` is one of a list the question offers: joined to a neighbour by ``or``, ``and``, a comma."""
    joins = []
    if i > 0:
        joins.append(question[pieces[i - 1][1]:pieces[i][0]])
    if i + 1 < len(pieces):
        joins.append(question[pieces[i][1]:pieces[i + 1][0]])
    return any(_LIST_JOIN.fullmatch(join) for join in joins)


def _asked(question: str, start: int, end: int) -> bool:
    """The question asks to evaluate or simplify ``question[start:end]`` as a whole: a trigger phrase right before
    it and the request ending right after it (``express``, ``write``, ``convert`` only with a form: ``in lowest
    terms``, ``as a decimal``), or ``= ?`` after it."""
    lead = question[max(0, start - 80):start]
    return bool(_TRIGGER.search(lead) and _REQUEST_ENDS.match(question, end)
                or _FORM_TRIGGER.search(lead) and _FORM_ENDS.match(question, end)
                or _EQUALS_WHAT.match(question, end))


def restates_question(pred: str | None, question: str, gold: Any) -> bool:
    """The answer is the expression the question asks to evaluate or simplify, whole and unevaluated (the module
    docstring states the rule). False wherever in doubt: a restatement loses a right-looking answer its marks."""
    try:
        return _restates(pred or "", question, str(gold))
    except RecursionError:  # maths nested past Python's stack (a hostile prompt): nothing is judged a copy
        return False


def _restates(pred: str, question: str, gold: str) -> bool:
    answer = _canonical(pred)
    if not answer or _OPERATION.search(answer) is None or answer == _canonical(gold):
        return False
    question = question.replace("\\$", "  ")  # an escaped dollar is a price sign, not a delimiter
    pieces = _maths(question)
    same = [i for i, (_, _, text) in enumerate(pieces) if text == answer]
    if any(_alternative(question, pieces, i) for i in same):
        return False
    # a form that simplifying gives back is an answer to "simplify", not to "as a decimal"
    return any(_asked(question, pieces[i][0], pieces[i][1])
               and (not final_form(answer) or _NUMBER_WANTED.match(question, pieces[i][1])) for i in same)
