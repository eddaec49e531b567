"""Directives in a job script: ``#BSUB`` and ``#SBATCH`` lines of its leading comment block.

The block is what LSF and sbatch read: after an optional ``#!`` line, every blank or
``#`` line up to the first other line.  A line is a directive when it starts (after
spaces) with the keyword followed by a space or its end; ``#BSUBX`` and ``# BSUB``
are plain comments.  The rest of the line is split into words as a shell would
(``#BSUB -J "my job"``, ``-R "rusage[mem=2G] span[hosts=1]"``; a word starting with
``#`` begins a comment), and the words go through the command line's own option
parser (options.py, slurm.py), so a directive accepts exactly what the option does
and an unknown one is refused by name with its line number.  Directive lines after
the block are not read; ``late_lines`` lists them so a caller can warn.
"""

from __future__ import annotations

from xce.core.jobspec.errors import DirectiveError
from xce.core.jobspec.options import (
    OptionSet,
    ParsedArgs,
    Source,
    directive_source,
    parse_bsub_args,
)
from xce.core.jobspec.plain import Plain
from xce.core.jobspec.slurm import parse_sbatch_args

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (plain.py says why)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    ArgParser = Callable[..., ParsedArgs]


class Directives(Plain):
    options: OptionSet
    late_lines: list[int] = []  # 1-based lines after the block that look like directives


def leading_block(script: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, stripped line) of the script's leading comment block."""
    for number, line in enumerate(script.splitlines(), start=1):
        text = line.strip()
        if number == 1 and text.startswith("#!"):
            continue
        if text and not text.startswith("#"):
            return
        yield number, text


def _directive_words(text: str, keyword: str) -> str | None:
    """The part after ``keyword`` if ``text`` is a directive line, else None."""
    if not text.startswith(keyword):
        return None
    rest = text[len(keyword):]
    return rest if not rest or rest[0].isspace() else None


def _split(rest: str, source: Source) -> list[str]:
    try:
        return split_words(rest)
    except ValueError as e:  # "No closing quotation", "No escaped character"
        raise DirectiveError(f"{source.prefix.strip()}{source.suffix}: {str(e).lower()} in {rest.strip()!r}") from None


def split_words(text: str) -> list[str]:
    """``shlex.split(text, comments=True)``, the same words and errors, without shlex: it imports
    re (and enum, functools, collections), which would cost every bsub or sbatch of a script
    milliseconds of its ~10 ms start-up.  tests/test_compat_startup.py compares the two."""
    words: list[str] = []
    word: list[str] = []
    quoted, i, n = False, 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n" or c == "#":
            if word or quoted:
                words.append("".join(word))
                word, quoted = [], False
            if c == "#":  # a comment, to the end of its line
                i = n if text.find("\n", i) < 0 else text.find("\n", i)
                continue
        elif c == "\\":
            if i + 1 >= n:
                raise ValueError("No escaped character")
            i += 1
            word.append(text[i])
        elif c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise ValueError("No closing quotation")
            word.append(text[i + 1:end])
            quoted, i = True, end
        elif c == '"':
            i = _double_quoted(text, i + 1, word)
            quoted = True
        else:
            word.append(c)
        i += 1
    if word or quoted:
        words.append("".join(word))
    return words


def _double_quoted(text: str, i: int, word: list[str]) -> int:
    """Inside ``"``: a backslash escapes only ``\\`` and ``"`` (else it stays); the closing quote's index."""
    while i < len(text):
        c = text[i]
        if c == '"':
            return i
        if c == "\\":
            if i + 1 >= len(text):
                raise ValueError("No escaped character")
            i += 1
            word.append(text[i] if text[i] in '\\"' else "\\" + text[i])
        else:
            word.append(c)
        i += 1
    raise ValueError("No closing quotation")


def _directives(script: str, keyword: str, parse: ArgParser) -> Directives:
    options = OptionSet(values={}, origins={})
    in_block = set()
    for number, text in leading_block(script):
        in_block.add(number)
        rest = _directive_words(text, keyword)
        if rest is None:
            continue
        source = directive_source(keyword, number)
        parse(_split(rest, source), source, into=options, allow_command=False)
    late = [n for n, line in enumerate(script.splitlines(), start=1)
            if n not in in_block and _directive_words(line.strip(), keyword) is not None]
    return Directives(options, late)


def bsub_directives(script: str) -> Directives:
    """The ``#BSUB`` options of ``script``, ready for ``options.merge_options``."""
    return _directives(script, "#BSUB", parse_bsub_args)


def sbatch_directives(script: str) -> Directives:
    """The ``#SBATCH`` options of ``script``, ready for ``slurm.merge_sbatch_options``."""
    return _directives(script, "#SBATCH", parse_sbatch_args)
