"""Whether a FILE given as a job's command is a job script (text) or a program (binary).

Imports nothing, so `xce submit`'s stdlib-only fast path (xce/cli/quick.py) asks the same
question as the full path (build.py) and falls back when the answer is "a script".
"""

SCRIPT_SNIFF = 4096  # how much of the file's head decides


def is_script(head: bytes) -> bool:
    """Text (no NUL, UTF-8) is a script whose ``#BSUB`` lines count; anything else is a program."""
    part = head[:SCRIPT_SNIFF]
    if b"\0" in part:
        return False
    try:
        part.decode("utf-8")
    except UnicodeDecodeError as e:
        return len(part) == SCRIPT_SNIFF and e.start >= SCRIPT_SNIFF - 3  # a character cut at the end
    return True
