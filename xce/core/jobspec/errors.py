"""The job-spec parsers' errors: one class per grammar, all of them InvalidRequest.

Every message names the option and quotes the offending text first, then says what
is wrong with it (``-J "a[1-0]": array range 1-0 ends before it starts``).  With
``text`` and ``pos`` a caret under the bad character follows, as ResReqError does.
They keep InvalidRequest's wire code (``invalid``), so every door already maps them;
a code of their own can come with the integration.
"""

from __future__ import annotations

from xce.core.errors import InvalidRequest


class JobSpecError(InvalidRequest):
    """A job option, directive or expression XCE cannot accept."""

    def __init__(self, message: str, text: str = "", pos: int | None = None) -> None:
        if text and pos is not None:
            message = f"{message}\n  {text}\n  {' ' * pos}^"
        super().__init__(message)
        self.text = text
        self.pos = pos


class DirectiveError(JobSpecError):
    """A bad option on the command line or in a ``#BSUB``/``#SBATCH`` line."""


class ArraySpecError(JobSpecError):
    """A bad job-array index list, running limit or element reference."""


class DependError(JobSpecError):
    """A bad dependency expression (``-w``, ``--dependency``)."""


class RunLimitError(JobSpecError):
    """A bad run limit, runtime estimate or memory limit."""
