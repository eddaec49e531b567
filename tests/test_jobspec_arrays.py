"""Job arrays: LSF -J and Slurm --array forms, element ids, and the compact ArraySpec."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xce.core.errors import InvalidRequest
from xce.core.jobspec.arrays import (
    ArraySpec,
    JobTarget,
    parse_index_list,
    parse_job_target,
    parse_lsf_job_name,
    parse_slurm_array,
)
from xce.core.jobspec.errors import ArraySpecError


@pytest.mark.parametrize("text, name, indices, limit", [
    ("myjob", "myjob", None, None),
    ("my job", "my job", None, None),
    ("myArray[1-1000]", "myArray", list(range(1, 1001)), None),
    ("a[1-100:2]", "a", list(range(1, 101, 2)), None),
    ("a[1,5,7-9]", "a", [1, 5, 7, 8, 9], None),
    ("a[1, 2, 3, 4, 5]", "a", [1, 2, 3, 4, 5], None),
    ("sort[1-1000]%50", "sort", list(range(1, 1001)), 50),
    ("a[7-9,1]", "a", [1, 7, 8, 9], None),
    ("a[1-10:3]", "a", [1, 4, 7, 10], None),
    ("a[2-9:3]", "a", [2, 5, 8], None),
    ("[1-3]", "", [1, 2, 3], None),
    ("x.y-z_1[5]", "x.y-z_1", [5], None),
])
def test_lsf_job_name_forms(text: str, name: str, indices: list[int] | None, limit: int | None) -> None:
    got_name, spec = parse_lsf_job_name(text)
    assert got_name == name
    if indices is None:
        assert spec is None
    else:
        assert spec is not None and list(spec) == indices and spec.count == len(indices) and spec.limit == limit


@pytest.mark.parametrize("text, message", [
    ("a[1-0]", '-J "a[1-0]": array range 1-0 ends before it starts'),
    ("a[0-5]", '-J "a[0-5]": index 0 is below the smallest index 1'),
    ("a[1-1001]", '-J "a[1-1001]": index 1001 is above the largest index 1000'),
    ("a[1-10:0]", '-J "a[1-10:0]": array range 1-10:0 has step 0'),
    ("a[1-10,5]", '-J "a[1-10,5]": index range 5 overlaps 1-10'),
    ("a[]", '-J "a[]": an empty index'),
    ("a[1,,2]", '-J "a[1,,2]": an empty index'),
    ("a[x]", "-J \"a[x]\": bad index range 'x'"),
    ("a[1-5", '-J "a[1-5": expected name[index_list]'),
    ("a[1-5]x", '-J "a[1-5]x": expected name[index_list]'),
    ("a[1-5]%0", '-J "a[1-5]%0": running limit %0 must be 1 or more'),
    ("a b[1-5]", "-J \"a b[1-5]\": array name 'a b' may hold only"),
])
def test_lsf_job_name_errors_point_at_the_part(text: str, message: str) -> None:
    with pytest.raises(ArraySpecError) as e:
        parse_lsf_job_name(text)
    assert e.value.message.startswith(message)
    assert isinstance(e.value, InvalidRequest)


def test_max_size_is_configurable_and_allows_a_million() -> None:
    with pytest.raises(ArraySpecError, match="1000000 elements is more than the maximum array size 1000"):
        parse_index_list("1-1000000", where="-J", max_size=1000, max_index=10**7)
    _, spec = parse_lsf_job_name("big[1-1000000]%100", max_size=1_000_000)
    assert spec is not None and spec.count == 1_000_000 and spec.limit == 100
    assert 999_999 in spec and 1_000_001 not in spec
    assert spec.position(1_000_000) == 999_999 and spec.index_at(500_000) == 500_001
    assert len(msgspec.msgpack.encode(spec)) < 32  # compact: ranges, not a million ints


@pytest.mark.parametrize("text, indices, limit", [
    ("0-31", list(range(32)), None),
    ("1,3,5,7", [1, 3, 5, 7], None),
    ("1-7:2", [1, 3, 5, 7], None),
    ("0-15%4", list(range(16)), 4),
    ("1,3,5-7:2", [1, 3, 5, 7], None),
    ("0-1000", list(range(1001)), None),
])
def test_slurm_array_forms(text: str, indices: list[int], limit: int | None) -> None:
    spec = parse_slurm_array(text)
    assert list(spec) == indices and spec.limit == limit


@pytest.mark.parametrize("text, message", [
    ("0-1001", "--array=0-1001: index 1001 is above the largest index 1000"),
    ("5-2", "--array=5-2: array range 5-2 ends before it starts"),
    ("0-5%x", "--array=0-5%x: running limit %x is not a whole number"),
])
def test_slurm_array_errors(text: str, message: str) -> None:
    with pytest.raises(ArraySpecError) as e:
        parse_slurm_array(text)
    assert e.value.message.startswith(message)


def test_step_and_end_for_lsb_jobindex() -> None:
    _, spec = parse_lsf_job_name("a[1-9:2,20]")
    assert spec is not None and spec.end == 20
    assert spec.step_of(5) == 2 and spec.step_of(20) == 1
    with pytest.raises(KeyError):
        spec.step_of(4)
    assert spec.text() == "1-9:2,20"


@pytest.mark.parametrize("text, target", [
    ("12", JobTarget(12)),
    ("12[3]", JobTarget(12, ArraySpec(((3, 3, 1),)))),
    ("12[1-5]", JobTarget(12, ArraySpec(((1, 5, 1),)))),
    ("12[1-5,7]", JobTarget(12, ArraySpec(((1, 5, 1), (7, 7, 1))))),
    ("12_3", JobTarget(12, ArraySpec(((3, 3, 1),)))),
])
def test_job_targets_in_control_commands(text: str, target: JobTarget) -> None:
    assert parse_job_target(text) == target
    assert parse_job_target(target.text()) == target or "_" in text


@pytest.mark.parametrize("text", ["", "x", "12[", "12[3", "12]3[", "-1", "12[5-1]"])
def test_bad_job_targets(text: str) -> None:
    with pytest.raises(ArraySpecError, match=f'job "{text}"'.replace("[", r"\[")):
        parse_job_target(text)


_range = st.tuples(st.integers(1, 60), st.integers(0, 25), st.integers(1, 7))


@settings(max_examples=300, deadline=None)
@given(st.lists(_range, min_size=1, max_size=5))
def test_spec_agrees_with_a_naive_expansion(parts: list[tuple[int, int, int]]) -> None:
    text = ",".join(f"{a}-{a + span}:{step}" for a, span, step in parts)
    naive: list[int] = []
    for a, span, step in parts:
        naive.extend(range(a, a + span + 1, step))
    if len(set(naive)) != len(naive) or _overlapping(parts):
        with pytest.raises(ArraySpecError, match="overlaps"):
            parse_index_list(text, where="-J", max_size=10_000)
        return
    spec = parse_index_list(text, where="-J", max_size=10_000)
    expanded = sorted(naive)
    assert list(spec) == expanded and spec.count == len(expanded) == len(spec)
    for i in range(0, 100):
        assert (i in spec) == (i in expanded)
    for pos, index in enumerate(expanded):
        assert spec.position(index) == pos and spec.index_at(pos) == index
    assert spec.end == expanded[-1]
    assert parse_index_list(spec.text(), where="-J", max_size=10_000) == spec
    with pytest.raises(IndexError):
        spec.index_at(len(expanded))


def _overlapping(parts: list[tuple[int, int, int]]) -> bool:
    spans = sorted((a, a + span - span % step) for a, span, step in parts)
    return any(b[0] <= a[1] for a, b in zip(spans, spans[1:]))


@pytest.mark.parametrize("text, canonical, shown", [
    ("a[1-100:2]", "1-99:2", "1-100:2"),    # as LSF's bjobs -A shows it: the list as submitted
    ("a[1, 5, 7-9]", "1,5,7-9", "1,5,7-9"),  # spaces dropped; the canonical text is kept as such
    ("a[7-9,1]", "1,7-9", "7-9,1"),
    ("a[1-1000]", "1-1000", "1-1000"),
])
def test_the_index_list_is_kept_as_submitted_for_display(text: str, canonical: str, shown: str) -> None:
    _, spec = parse_lsf_job_name(text)
    assert spec is not None and spec.text() == canonical and spec.shown() == shown
    assert spec.given == ("" if shown == canonical else shown)  # no bytes when they agree
    assert parse_slurm_array("0-15:4%2").shown() == "0-15:4"
