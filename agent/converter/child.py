"""The converter's child process: limits itself, reads one document from stdin, answers JSON on stdout.

Run as `python -I -B child.py` (process.py): isolated from the environment (no variable of the
worker, no secret, no PYTHONPATH), writing no bytecode. Its first act after reading the request's
header is to lower its own limits, so whatever the file does afterwards runs under them:

- RLIMIT_AS: the address space the whole interpreter may use (a zip bomb meets MemoryError);
- RLIMIT_CPU: processing seconds (the OS sends SIGXCPU, then SIGKILL at the hard limit);
- RLIMIT_FSIZE 0 and no core dumps: it writes no file (SIGXFSZ ignored, so a write fails instead).

Input: one line of JSON {"kind", "extension", "limits"}, then the document's bytes to EOF.
Output: the JSON answer of parsers.parse (blocks and note, or refused).
"""

import json
import os
import resource
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # its sibling parsers.py, nothing else of agent

from parsers import Limits, parse  # noqa: E402


def limit(limits: Limits) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 2))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    os.nice(limits.nice)  # below the loop that waits on it: the worker's runs keep their core


def peak_rss_bytes() -> int:
    """This process's own peak resident memory (VmHWM: getrusage's maxrss keeps the forking parent's)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main() -> int:
    request = json.loads(sys.stdin.buffer.readline())
    limits = Limits.of(request["limits"])
    limit(limits)
    data = sys.stdin.buffer.read()
    answer = parse(str(request["kind"]), data, limits, extension=str(request.get("extension") or ""))
    answer["peak_rss_bytes"] = peak_rss_bytes()
    sys.stdout.write(json.dumps(answer))  # ASCII: nothing a file holds can break the pipe's encoding
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
