"""Tests for xce.core.resreq: the -R resource requirement parser and select matcher."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xce.core.errors import ResReqError
from xce.core.resources import BUILTIN, ResourceDef
from xce.core.resreq import (
    OrderKey,
    ResReq,
    RusageItem,
    parse_resreq,
    rusage_amount,
    select_matches,
    select_names,
)
from xce.core.units import GIB, MIB

SITE = dict(BUILTIN, lic=ResourceDef("lic", "virtual", "count", scope="cluster"),
            scratch=ResourceDef("scratch", "real", "bytes"), os=ResourceDef("os", "attribute", "string"))


def mem(amount: int, **kw: object) -> RusageItem:
    return RusageItem("mem", amount, **kw)  # type: ignore[arg-type]


VALID = [
    ("", ResReq()),
    ("   ", ResReq()),
    ("rusage[mem=1024]", ResReq(rusage=(mem(1024 * MIB),))),
    ("rusage[mem=2G]", ResReq(rusage=(mem(2 * GIB),))),
    ("rusage[mem=1.5g]", ResReq(rusage=(mem(1536 * MIB),))),
    ("rusage[mem=1G:duration=10:decay=1]", ResReq(rusage=(mem(GIB, duration_s=600, decay=True),))),
    ("rusage[mem=1G:duration=30s]", ResReq(rusage=(mem(GIB, duration_s=30),))),
    ("rusage[mem=1G:duration=2h:decay=0]", ResReq(rusage=(mem(GIB, duration_s=7200),))),
    ("rusage[duration=5m:mem=1G]", ResReq(rusage=(mem(GIB, duration_s=300),))),
    ("rusage[mem=2G/task]", ResReq(rusage=(mem(2 * GIB, method="task"),))),
    ("rusage[mem=2G/job]", ResReq(rusage=(mem(2 * GIB, method="job"),))),
    ("rusage[ mem = 2G / host ]", ResReq(rusage=(mem(2 * GIB, method="host"),))),
    ("rusage[slots=2]", ResReq(rusage=(RusageItem("slots", 2),))),
    # colon form: two resources, duration/decay apply to all of them
    ("rusage[mem=500:lic=1]", ResReq(rusage=(mem(500 * MIB), RusageItem("lic", 1)))),
    ("rusage[mem=500:lic=1:duration=2:decay=1]",
     ResReq(rusage=(mem(500 * MIB, duration_s=120, decay=True), RusageItem("lic", 1, duration_s=120, decay=True)))),
    # comma form: duration applies only to the resource string it follows
    ("rusage[mem=500, lic=1:duration=2]", ResReq(rusage=(mem(500 * MIB), RusageItem("lic", 1, duration_s=120)))),
    ("rusage[mem=500:duration=1h, lic=1]", ResReq(rusage=(mem(500 * MIB, duration_s=3600), RusageItem("lic", 1)))),
    ("select[type==any] order[mem] rusage[mem=500]",
     ResReq(select="type==any", order=(OrderKey("mem", True),), rusage=(mem(500 * MIB),))),
    ("span[hosts=1]", ResReq(span_hosts=1)),
    ("span[ptile=4]", ResReq(span_ptile=4)),
    ("span[ ptile = 16 ]", ResReq(span_ptile=16)),
    ("order[-mem]", ResReq(order=(OrderKey("mem", False),))),
    ("order[slots:-mem: ncpus]",
     ResReq(order=(OrderKey("slots", True), OrderKey("mem", False), OrderKey("ncpus", True)))),
    ("mem>4G && slots>=2", ResReq(select="mem>4G && slots>=2")),
    ("mem>4G", ResReq(select="mem>4G")),
    ("select[mem>4G && slots>=2] order[-mem] rusage[mem=2G:duration=10:decay=1] span[hosts=1]",
     ResReq(select="mem>4G && slots>=2", order=(OrderKey("mem", False),),
            rusage=(mem(2 * GIB, duration_s=600, decay=True),), span_hosts=1)),
    ("span[hosts=1] rusage[mem=1G] select[slots>0]",  # any order
     ResReq(select="slots>0", rusage=(mem(GIB),), span_hosts=1)),
    ("  select [ mem > 4G ]  order [ mem ]  ", ResReq(select="mem>4G", order=(OrderKey("mem", True),))),
    ("rusage[scratch=10G]", ResReq(rusage=(RusageItem("scratch", 10 * GIB),))),
]


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_valid(text: str, expected: ResReq) -> None:
    got = parse_resreq(text, SITE)
    assert got == ResReq(text=text, rusage=expected.rusage, select=expected.select, order=expected.order,
                         span_hosts=expected.span_hosts, span_ptile=expected.span_ptile)


def test_default_catalog_is_builtin() -> None:
    assert parse_resreq("rusage[mem=1G]").rusage == (mem(GIB),)
    with pytest.raises(ResReqError, match="unknown resource 'lic'"):
        parse_resreq("rusage[lic=1]")


SELECT_NORMALISED = [
    ("mem>500", "mem>500M"),  # bare numbers are MB for mem, as in LSF
    ("mem>1536M", "mem>1536M"),
    ("mem>=1.5G", "mem>=1536M"),
    ("mem>2048K", "mem>2M"),
    ("mem>1000B", "mem>1000B"),
    ("mem=4G", "mem==4G"),
    ("type==X86_64", 'type=="X86_64"'),
    ("type=='X86_64'", 'type=="X86_64"'),
    ('hname!="node-01"', 'hname!="node-01"'),
    ("hname==node-01.example", 'hname=="node-01.example"'),
    ("X86_64==type", '"X86_64"==type'),
    ("mem>4G and slots>=2 or not ncpus<4", "mem>4G && slots>=2 || !(ncpus<4)"),
    ("(mem>4G || slots>=2) && ncpus>1", "(mem>4G || slots>=2) && ncpus>1"),
    ("mem>4G || slots>=2 && ncpus>1", "mem>4G || slots>=2 && ncpus>1"),
    ("((mem>1G))", "mem>1G"),
    ("!!mem>1G", "mem>1G"),
    ("!(mem>1G && slots>1)", "!(mem>1G && slots>1)"),
    ("!slots", "!slots"),
    ("maxmem>mem", "maxmem>mem"),
    ("2<=slots", "2<=slots"),
    ("maxslots>=ncpus", "maxslots>=ncpus"),
]


@pytest.mark.parametrize(("expr", "normalised"), SELECT_NORMALISED)
def test_select_normalised_and_reparseable(expr: str, normalised: str) -> None:
    assert parse_resreq(expr).select == normalised
    assert parse_resreq(f"select[{expr}]").select == normalised
    assert parse_resreq(f"select[{normalised}]").select == normalised


HOST = {"mem": 8 * GIB, "slots": 4, "maxmem": 16 * GIB, "maxslots": 8, "ncpus": 8,
        "type": "X86_64", "model": "EPYC", "hname": "node-01"}

MATCHES = [
    (None, True),
    ("mem>4G && slots>=2", True),
    ("mem>8G", False),
    ("mem>=8G", True),
    ("mem>8191", True),  # bare number: MB
    ("mem>8192", False),
    ("slots>4 || ncpus==8", True),
    ("!(slots>4 || ncpus==8)", False),
    ('type=="X86_64"', True),
    ("type==X86_64", True),
    ('type!="X86_64"', False),
    ("type==any", True),
    ("model==any && type!=any", False),
    ('hname=="node-02"', False),
    ("maxmem>mem", True),
    ("ncpus", True),
    ("lic>0", False),  # attribute the host does not report: false
    ("!lic", True),
    ("4<slots", False),
]


@pytest.mark.parametrize(("expr", "expected"), MATCHES)
def test_select_matches(expr: str | None, expected: bool) -> None:
    assert select_matches(expr, HOST) is expected


def test_select_matches_via_normalised_text() -> None:
    # site resources (a bytes one, a string one) are not in BUILTIN: the normalised text is unambiguous
    req = parse_resreq("select[mem>4G && slots>=2 && scratch>1024 && os==rhel9]", SITE)
    assert req.select == 'mem>4G && slots>=2 && scratch>1G && os=="rhel9"'
    host = {"mem": 5 * GIB, "slots": 2, "scratch": 2 * GIB, "os": "rhel9"}
    assert select_matches(req.select, host)
    assert not select_matches(req.select, host | {"scratch": GIB})
    assert not select_matches(req.select, host | {"os": "rhel8"})
    assert not select_matches(req.select, {"mem": 5 * GIB, "slots": 2, "os": "rhel9"})


def test_select_matches_type_mismatch_is_false() -> None:
    assert not select_matches("ncpus>2", {"ncpus": "many"})


def test_select_names() -> None:
    assert select_names(None) == set()
    assert select_names('mem>4G && (type=="X86_64" || !slots) && 1<ncpus') == {"mem", "type", "slots", "ncpus"}
    assert select_names("type==X86_64") == {"type"}


def test_rusage_amount() -> None:
    req = parse_resreq("rusage[mem=500, lic=1:duration=2]", SITE)
    assert rusage_amount(req, "lic") == RusageItem("lic", 1, duration_s=120)
    assert rusage_amount(req, "mem") == mem(500 * MIB)
    assert rusage_amount(req, "slots") is None


INVALID = [
    # rusage
    ("rusage[mem=(500 300):duration=(10):decay=(0)]", "rusage: multi-phase rusage is not supported", 11),
    ("rusage[mem=(300 500):duration=(10)]", "rusage: multi-phase rusage is not supported", 11),
    ("rusage[mem=20 || mem=10]", "rusage: alternative rusage (||) is not supported", 14),
    ("rusage[ncpus=1]", "rusage: 'ncpus' is not a consumable resource", 7),
    ("rusage[type=x]", "rusage: 'type' is not a consumable resource", 7),
    ("rusage[mem=5X]", "rusage: unknown unit 'X' in '5X'", 12),
    ("rusage[mem=5GiB]", "rusage: unknown unit 'GiB' in '5GiB'", 12),
    ("rusage[slots=2G]", "rusage: unit 'G' not allowed for 'slots' in '2G'", 14),
    ("rusage[slots=1.5]", "rusage: 'slots' must be a whole number", 13),
    ("rusage[foo=1]", "rusage: unknown resource 'foo'", 7),
    ("rusage[mem=0]", "rusage: amount for 'mem' must be positive", 11),
    ("rusage[mem=-5]", "rusage: amount for 'mem' must be positive", 11),
    ("rusage[mem=1G:decay=1]", "rusage: decay=1 needs a duration", 14),
    ("rusage[mem=1G:duration=10:decay=2]", "rusage: decay must be 0 or 1", 32),
    ("rusage[mem=1G:duration=10d]", "rusage: unknown unit 'd' in '10d'", 25),
    ("rusage[mem=1G:duration=0]", "rusage: duration must be positive", 23),
    ("rusage[mem=1G:duration=-1]", "rusage: duration must be positive", 23),
    ("rusage[mem=1G/node]", "rusage: unknown method 'node'", 14),
    ("rusage[mem=1G:mem=2G]", "rusage: 'mem' given twice", 14),
    ("rusage[mem=1G, mem=2G]", "rusage: 'mem' given twice", 15),
    ("rusage[mem=1G:duration=1:duration=2]", "rusage: 'duration' given twice", 25),
    ("rusage[duration=10]", "rusage: duration/decay without a resource", 7),
    ("rusage[mem=1G lic=1]", "rusage: expected ':' or ','", 14),
    ("rusage[mem=1G:]", "rusage: expected a resource name, found end of section", 14),
    ("rusage[mem]", "rusage: expected '=' after 'mem'", 10),
    ("rusage[mem=]", "rusage: expected a number for 'mem', found end of section", 11),
    # sections and brackets
    ("select[mem>4G", "select: unbalanced '[' (no matching ']')", 6),
    ("select[mem>4G]]", "resreq: unbalanced ']' (no matching '[')", 14),
    ("mem>4G]", "resreq: unbalanced ']' (no matching '[')", 6),
    ("select[mem>4G order[mem]", "select: unbalanced '[' (no matching ']')", 6),
    ("foo[x]", "resreq: unknown section 'foo[]'", 0),
    ("select[mem>1] bar[x]", "resreq: unknown section 'bar[]'", 14),
    ("same[type]", "same: same[] sections are not supported", 0),
    ("cu[type=enclosure]", "cu: cu[] sections are not supported", 0),
    ("select[mem>1] affinity[core(1)]", "affinity: affinity[] sections are not supported", 14),
    ("select[mem>1] select[slots>1]", "select: section given twice", 14),
    ("rusage[mem=1G] order[mem] rusage[lic=1]", "rusage: section given twice", 26),
    ("mem>4G order[mem]", "resreq: unexpected text 'mem>4G' outside a section", 0),
    ("order[mem] junk", "resreq: unexpected text 'junk' outside a section", 11),
    ("[mem>1]", "resreq: '[' without a section name", 0),
    ("select[]", "select: empty section", 6),
    ("rusage[  ]", "rusage: empty section", 6),
    # select
    ("select[mem>]", "select: expected a value after '>'", 11),
    ("select[mem>4G &&]", "select: expected a resource name, found end of section", 16),
    ("select[mem>4G slots>1]", "select: unexpected 'slots'", 14),
    ("select[(mem>4G]", "select: expected ')', found end of section", 14),
    ("select[mem>4G)]", "select: unexpected ')'", 13),
    ("select[foo>1]", "select: unknown resource 'foo'", 7),
    ("select[foo]", "select: unknown resource 'foo'", 7),
    ("select[type>x]", "select: '>' cannot compare string attribute 'type'", 11),
    ("select[type==local]", "select: type==local is not supported", 13),
    ("select[slots>2G]", "select: unit 'G' not allowed for count resource 'slots' in '2G'", 14),
    ("select[mem>4X]", "select: unknown unit 'X' in '4X'", 12),
    ("select[mem>\"4G\"]", "select: 'mem' is numeric; expected a number", 11),
    ("select[mem==slots]", "select: cannot compare 'mem' (bytes) with 'slots' (count)", 10),
    ("select[1>2]", "select: a comparison needs a resource name", 7),
    ("select[mem>4G @ x]", "select: unexpected character '@'", 14),
    ('select[type=="X86_64]', "select: unterminated string", 13),
    ("mem>4G && type=='x", "select: unterminated string", 16),
    ("select[mem>123456789012345678901234]", "select: number too long", 11),
    ("(" * 60 + "mem>1" + ")" * 60, "select: expression nested too deeply", 50),
    ("mem >", "select: expected a value after '>'", 5),
    # order
    ("order[type]", "order: 'type' is a string attribute and cannot be ordered", 6),
    ("order[foo]", "order: unknown resource 'foo'", 6),
    ("order[mem:mem]", "order: 'mem' given twice", 10),
    ("order[mem slots]", "order: expected ':' between keys", 10),
    ("order[!mem]", "order: '!' in order[] is not supported", 6),
    # span
    ("span[hosts=2]", "span: only hosts=1 is supported", 11),
    ("span[hosts=-1]", "span: only hosts=1 is supported", 11),
    ("span[ptile=0]", "span: ptile must be a positive whole number", 11),
    ("span[ptile=-2]", "span: ptile must be a positive whole number", 11),
    ("span[ptile=x]", "span: expected a number for ptile", 11),
    ("span[hosts=1:ptile=2]", "span: hosts and ptile cannot be combined", 13),
    ("span[ptile=2:ptile=4]", "span: ptile given twice", 13),
    ("span[block=2]", "span: unknown option 'block'", 5),
]


@pytest.mark.parametrize(("text", "message", "pos"), INVALID)
def test_invalid(text: str, message: str, pos: int) -> None:
    with pytest.raises(ResReqError) as info:
        parse_resreq(text, SITE)
    err = info.value
    assert err.message.startswith(message), err.message
    assert err.pos == pos, err.message
    assert err.text == text
    # the rendered message carries the text and a caret under the offending position
    assert err.message.endswith(f"\n  {text}\n  {' ' * pos}^")


def test_select_matches_rejects_bad_syntax() -> None:
    with pytest.raises(ResReqError, match="select: "):
        select_matches("mem >", {"mem": 1})


def test_select_matches_is_cached() -> None:
    from xce.core import resreq
    resreq._parsed.cache_clear()
    for _ in range(3):
        select_matches("mem>1G && slots>0", {"mem": 2 * GIB, "slots": 1})
    info = resreq._parsed.cache_info()
    assert (info.misses, info.hits) == (1, 2)


GRAMMARISH = st.text(alphabet="selctordusagpnmhi[]()=:,/!&|<>-'\" 0123456789GKMTXsx_.", max_size=60)
FRAGMENTS = st.lists(st.sampled_from([
    "select[", "order[", "rusage[", "span[", "]", "(", ")", "mem", "slots", "type", "ncpus", "lic", "-",
    "=", "==", ">", ">=", "!", "&&", "||", "and", "not", ":", ",", "/task", "duration=", "decay=", "1", "0",
    "4G", "10m", "X86_64", "'x'", "hosts=", "ptile=", " ", "any",
]), max_size=20).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=80), GRAMMARISH, FRAGMENTS))
def test_parse_never_fails_unexpectedly(text: str) -> None:
    try:
        req = parse_resreq(text, SITE)
    except ResReqError as err:
        assert err.pos is not None and 0 <= err.pos <= len(text)
        return
    assert isinstance(req, ResReq)
    if req.select is not None:  # the normalised select is stable and usable by the matcher
        assert parse_resreq(f"select[{req.select}]", SITE).select == req.select
        assert select_matches(req.select, HOST) in (True, False)
        assert select_names(req.select) <= set(SITE)
