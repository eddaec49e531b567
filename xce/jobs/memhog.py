"""A job that holds memory in a shape over time: `python -m xce.jobs.memhog STEPS...`.

Each step is ``MB:SECONDS`` — grow (or shrink) the resident set to MB and hold
it for SECONDS.  Pages are touched so they are really resident.  Used by the
demo and the tests to make usage land under, at, above and across a reservation.
"""

from __future__ import annotations

import sys
import time


def main(argv: list[str]) -> int:
    held: list[bytearray] = []
    for step in argv:
        mb_s, _, secs_s = step.partition(":")
        target = int(float(mb_s)) * 1024 * 1024
        have = sum(len(b) for b in held)
        while have < target:
            chunk = bytearray(min(16 * 1024 * 1024, target - have))
            for i in range(0, len(chunk), 4096):
                chunk[i] = 1
            held.append(chunk)
            have += len(chunk)
        while held and have > target:
            have -= len(held.pop())
        print(f"holding {have >> 20} MB for {secs_s or 0}s", flush=True)
        time.sleep(float(secs_s or 0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
