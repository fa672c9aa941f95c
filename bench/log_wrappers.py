"""How capture tools wrap the lines of a console log, for ``log_accuracy.py --wrap`` (issue #16).

Users rarely hand diag the bare output of a process: ``kubectl logs --timestamps`` / ``docker logs -t`` put an
RFC 3339 stamp before every line, ``docker compose logs`` the service's name and a bar, web log viewers and CI
consoles a clock time, Windows editors CRLF line ends, zh_CN consoles GB18030 bytes. A diagnosis that changes
under such a wrapper is fitted to one capture, not to the failure; ``--wrap`` measures that on the wild corpus.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

# Each wrapper: (text of the original file) -> bytes of the file as that capture tool would have saved it.
# The stamps are fixed, not taken from the log: a wrapper's clock is the capture host's, not the process's.


def _per_line(prefix: Callable[[int], str]) -> Callable[[str], bytes]:
    def wrap(text: str) -> bytes:
        return "".join(prefix(i) + line for i, line in enumerate(text.splitlines(keepends=True))).encode()

    return wrap


WRAPPERS: dict[str, Callable[[str], bytes]] = {
    # a web log viewer / CI console clock: "18:19:06.687 <line>"
    "clock": _per_line(lambda i: f"18:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d} "),
    # kubectl logs --timestamps, docker logs -t: RFC 3339 with nanoseconds and Z
    "rfc3339": _per_line(lambda i: f"2026-02-05T18:{i // 60 % 60:02d}:{i % 60:02d}.{i:09d}Z "),
    # docker compose logs: the container's name padded, a bar
    "compose": _per_line(lambda i: "vllm-server-1  | "),
    "crlf": lambda text: text.replace("\r\n", "\n").replace("\n", "\r\n").encode(),
    "gb18030": lambda text: text.encode("gb18030", errors="replace"),
}


def wrapped_copy(path: Path, wrapper: str, folder: Path) -> Path:
    """``path`` rewritten by ``wrapper`` into ``folder`` under the same name; ``path`` itself for ``none``."""
    if wrapper == "none":
        return path
    text = path.read_bytes().decode("utf-8", errors="replace")
    out = folder / path.name
    out.write_bytes(WRAPPERS[wrapper](text))
    return out
