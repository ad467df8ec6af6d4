"""Correct competitive-programming solutions, written the ways models write them, with their tests.

``STDIN``: name -> (program, inputs, outputs); ``CALLS``: name -> (program, fn_name, inputs, outputs). Every one
must earn the full code reward. ``HOSTILE``: name -> program that must score 0 on ``HOSTILE_TESTS``.
"""

from __future__ import annotations

from honest_programs import S


def _fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


BIG_N = 200_000
BIG_INPUT = f"{BIG_N}\n" + " ".join(str(i % 1000) for i in range(BIG_N)) + "\n"
BIG_SUM = str(sum(i % 1000 for i in range(BIG_N)))

STDIN: dict[str, tuple[str, list[str], list[str]]] = {
    "input_split": ("a, b = map(int, input().split())\nprint(a + b)", ["1 2\n", "-5 5\n"], ["3\n", "0\n"]),
    "main_guard": (S("""
        import sys
        def main():
            a, b = map(int, sys.stdin.readline().split())
            print(a * b)
        if __name__ == "__main__":
            main()
        """), ["3 4\n"], ["12\n"]),
    "stdin_read_all": (S("""
        import sys
        data = sys.stdin.read().split()
        n = int(data[0])
        print(sum(map(int, data[1:1 + n])))
        """), ["3\n1 2 3\n", "1\n\n\n7\n"], ["6\n", "7\n"]),
    "input_until_eof": (S("""
        total = 0
        while True:
            try:
                line = input()
            except EOFError:
                break
            total += int(line)
        print(total)
        """), ["1\n2\n3\n", "10\n"], ["6", "10"]),
    "for_line_in_stdin": (S("""
        import sys
        for line in sys.stdin:
            print(line.strip()[::-1])
        """), ["abc\nxy\n"], ["cba\nyx\n"]),
    "buffer_read": (S("""
        import sys
        data = sys.stdin.buffer.read().split()
        print(max(map(int, data[1:])))
        """), ["4\n3 9 2 7\n"], ["9\n"]),
    "multiple_test_cases": (S("""
        t = int(input())
        for _ in range(t):
            n = int(input())
            arr = list(map(int, input().split()))
            print(sum(arr) - n)
        """), ["2\n3\n1 2 3\n2\n5 5\n"], ["3\n8\n"]),
    "large_input": (S("""
        import sys
        input = sys.stdin.readline
        n = int(input())
        print(sum(map(int, input().split())))
        """), [BIG_INPUT], [BIG_SUM + "\n"]),
    "large_output": ("n = int(input())\nprint('\\n'.join(str(i) for i in range(n)))", ["50000\n"],
                     ["\n".join(str(i) for i in range(50000)) + "\n"]),
    "float_near_tolerance": ("a, b = map(float, input().split())\nprint(a / b)", ["1 3\n", "2 7\n"],
                             ["0.333333333333", "0.2857142"]),
    "float_formatted": ("x = float(input())\nprint(f'{x ** 0.5:.10f}')", ["2\n"], ["1.414213562"]),
    "trailing_spaces": ("n = int(input())\nprint(*range(n), end=' \\n')", ["4\n"], ["0 1 2 3"]),
    "no_trailing_newline": ("import sys\nsys.stdout.write(str(sum(map(int, input().split()))))", ["1 1\n"],
                            ["2\n"]),
    "windows_newlines": ("a = input().strip()\nprint(a.upper())", ["abc\r\n"], ["ABC\n"]),
    "grid": (S("""
        h, w = map(int, input().split())
        grid = [input() for _ in range(h)]
        print(sum(row.count('#') for row in grid))
        """), ["2 3\n#.#\n.##\n"], ["4\n"]),
    "recursion_deep": (S("""
        import sys
        sys.setrecursionlimit(100000)
        def depth(n):
            return 0 if n == 0 else 1 + depth(n - 1)
        print(depth(int(input())))
        """), ["20000\n"], ["20000\n"]),
    "threading_stack": (S("""
        import sys, threading
        def main():
            sys.setrecursionlimit(1 << 20)
            def f(n):
                return 0 if n == 0 else 1 + f(n - 1)
            print(f(int(input())))
        threading.stack_size(1 << 26)
        t = threading.Thread(target=main)
        t.start()
        t.join()
        """), ["50000\n"], ["50000\n"]),
    "lru_cache_dp": (S("""
        from functools import lru_cache
        import sys
        sys.setrecursionlimit(10000)
        @lru_cache(maxsize=None)
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
        print(fib(int(input())) % (10 ** 9 + 7))
        """), ["500\n"], [str(_fib(500) % (10 ** 9 + 7)) + "\n"]),
    "big_integers": ("n = int(input())\nprint(2 ** n)", ["200\n"], [str(2 ** 200) + "\n"]),
    "yes_no": ("n = int(input())\nprint('YES' if n % 2 == 0 and n > 2 else 'NO')", ["8\n", "2\n"], ["YES\n", "NO\n"]),
    "heapq_dijkstra": (S("""
        import heapq
        n, m = map(int, input().split())
        g = [[] for _ in range(n + 1)]
        for _ in range(m):
            u, v, w = map(int, input().split())
            g[u].append((v, w))
            g[v].append((u, w))
        dist = [float('inf')] * (n + 1)
        dist[1] = 0
        pq = [(0, 1)]
        while pq:
            d, u = heapq.heappop(pq)
            if d > dist[u]:
                continue
            for v, w in g[u]:
                if d + w < dist[v]:
                    dist[v] = d + w
                    heapq.heappush(pq, (dist[v], v))
        print(dist[n])
        """), ["3 3\n1 2 1\n2 3 2\n1 3 5\n"], ["3\n"]),
    "print_with_sep": ("a = list(map(int, input().split()))\nprint(*sorted(a), sep=', ')", ["3 1 2\n"],
                       ["1, 2, 3\n"]),
    "unicode_output": ("print(input()[::-1])", ["héllo\n"], ["olléh\n"]),
    "exit_zero_after_answer": ("import sys\nprint(int(input()) + 1)\nsys.exit(0)", ["1\n"], ["2\n"]),
    "exit_via_quit": ("print(7)\nexit()", [""], ["7\n"]),
    "numpy_solution": (S("""
        import numpy as np
        a = np.array(input().split(), dtype=np.int64)
        print(int(a.sum()))
        """), ["1 2 3\n"], ["6\n"]),
    "stderr_debugging": ("import sys\nx = int(input())\nprint('debug', x, file=sys.stderr)\nprint(x * 2)", ["4\n"],
                         ["8\n"]),
    "empty_lines_in_output": ("print('a')\nprint()\nprint('b')", [""], ["a\n\nb\n"]),
}

CALLS: dict[str, tuple[str, str, list, list]] = {
    "plain_function": ("def add(a, b):\n    return a + b", "add", [[1, 2], [-1, 1]], [3, 0]),
    "wrapped_output": ("def square(x):\n    return x * x", "square", [[3], [4]], [[9], [16]]),
    "tuple_as_list": ("def divmod2(a, b):\n    return (a // b, a % b)", "divmod2", [[7, 2]], [[3, 1]]),
    "class_solution": (S("""
        from typing import List
        class Solution:
            def twoSum(self, nums: List[int], target: int) -> List[int]:
                seen = {}
                for i, x in enumerate(nums):
                    if target - x in seen:
                        return [seen[target - x], i]
                    seen[x] = i
        """), "twoSum", [[[2, 7, 11, 15], 9]], [[0, 1]]),
    "float_result": ("def mean(xs):\n    return sum(xs) / len(xs)", "mean", [[[1, 2, 2]]], [1.6666666667]),
    "string_result": ("def shout(s):\n    return s.upper() + '!'", "shout", [["hi"]], ["HI!"]),
    "bool_result": ("def even(n):\n    return n % 2 == 0", "even", [[2], [3]], [True, False]),
    "nested_lists": ("def transpose(m):\n    return [list(r) for r in zip(*m)]", "transpose", [[[[1, 2], [3, 4]]]],
                     [[[1, 3], [2, 4]]]),
    "dict_result": ("def counts(s):\n    from collections import Counter\n    return dict(Counter(s))", "counts",
                    [["aab"]], [{"a": 2, "b": 1}]),
    "none_result": ("def nothing(x):\n    return None", "nothing", [[1]], [None]),
    "recursive_call": ("def fact(n):\n    return 1 if n < 2 else n * fact(n - 1)", "fact", [[10]], [3628800]),
    "builtin_named": ("def sum(xs):\n    total = 0\n    for x in xs:\n        total += x * 2\n    return total", "sum",
                      [[[1, 2]]], [6]),
    "helper_functions": (S("""
        def is_prime(n):
            return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))
        def primes_up_to(n):
            return [k for k in range(n + 1) if is_prime(k)]
        """), "primes_up_to", [[10]], [[2, 3, 5, 7]]),
    "in_place_and_return": ("def sort_desc(xs):\n    xs.sort(reverse=True)\n    return xs", "sort_desc",
                            [[[3, 1, 2]]], [[3, 2, 1]]),
    "solution_with_state": (S("""
        class Solution:
            def __init__(self):
                self.memo = {}
            def climbStairs(self, n: int) -> int:
                if n <= 2:
                    return n
                if n not in self.memo:
                    self.memo[n] = self.climbStairs(n - 1) + self.climbStairs(n - 2)
                return self.memo[n]
        """), "climbStairs", [[5], [10]], [8, 89]),
}

HOSTILE_TESTS = (["2 3\n", "10 20\n"], ["5\n", "30\n"])
HOSTILE: dict[str, str] = {
    "prints_a_guess": "print(42)",
    "prints_many_guesses": "for i in range(100):\n    print(i)",
    "reads_files": S("""
        import os
        found = []
        for root in ('/', '/tmp', '/work', os.path.expanduser('~')):
            for dirpath, dirs, files in os.walk(root):
                found += files
                if len(found) > 5000:
                    break
        print(len(found))
        """),
    "reads_environ": "import os\nprint(os.environ.get('EXPECTED', ''))",
    "reads_proc": S("""
        import os
        out = []
        for pid in os.listdir('/proc'):
            if pid.isdigit():
                try:
                    out.append(open(f'/proc/{pid}/cmdline').read())
                except OSError:
                    pass
        print(len(out))
        """),
    "exit_before_answer": "import sys\nsys.exit(0)",
    "os_exit": "import os\nos._exit(0)",
    "crash_after_print": "a, b = map(int, input().split())\nprint(a + b)\nraise RuntimeError('boom')",
    "flood_stdout": "while True:\n    print('5' * 1000)",
    "sleep_past_limit": "import time\ntime.sleep(30)\nprint(5)",
    "busy_loop": "while True:\n    pass",
    "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
    "fork_and_answer_later": S("""
        import os, time
        if os.fork() == 0:
            time.sleep(2)
            print(5, flush=True)
        """),
    "writes_to_stdin": "import os\ntry:\n    os.write(0, b'5\\n')\nexcept OSError:\n    pass\nprint(0)",
    "kills_parent": ("import os, signal\ntry:\n    os.kill(os.getppid(), signal.SIGKILL)\nexcept OSError:\n"
                     "    pass\nprint(0)"),
    "memory_bomb": "x = 'a' * (1 << 34)\nprint(5)",
}
