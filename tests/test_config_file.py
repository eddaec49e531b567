"""config/xce.toml: it loads, it shows the defaults, it documents every key.

The file deliberately differs from ``Config()`` in one place only: it shows an
example site resource, ``[resources.example_lic]`` (by default there are none).
Its ``[queues.normal]`` table is the built-in default queue, written out.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import msgspec
import pytest

from xce.core.errors import ConfigError
from xce.site.config import (
    reclaim_queue,
    BackfillConf,
    ClusterConf,
    Config,
    ControllerConf,
    FairshareConf,
    QueueConf,
    ReclaimConf,
    ResourceConf,
    SchedulerConf,
    WorkerConf,
    load,
)

FILE = Path(__file__).resolve().parent.parent / "config" / "xce.toml"

# The one deliberate example in the file.
EXAMPLE_RESOURCES = {"example_lic": ResourceConf(kind="virtual", scope="cluster", total=4,
                                                 description="example floating licence (delete or rename)")}
# Config fields that are not settings: ``source`` is filled in by the loader with the file's path.
NOT_SETTINGS = {"source"}
SECTIONS = {"cluster": ClusterConf, "controller": ControllerConf, "scheduler": SchedulerConf,
            "worker": WorkerConf, "fairshare": FairshareConf, "backfill": BackfillConf,
            "reclaim": ReclaimConf}
TABLES = {"queues": QueueConf, "resources": ResourceConf}


def raw() -> dict:
    return tomllib.loads(FILE.read_text())


def test_file_loads_and_equals_the_defaults_but_for_the_example():
    cfg = load(FILE)
    expected = msgspec.structs.replace(Config(), resources=dict(EXAMPLE_RESOURCES), source=str(FILE))
    assert cfg == expected
    # Spelled out, so a change of default in xce/site/config.py points here.
    for name in SECTIONS:
        assert getattr(cfg, name) == getattr(Config(), name), name
    assert cfg.queues == Config().queues == {"normal": QueueConf(default=True), "reclaim": reclaim_queue()}
    assert cfg.default_queue() == "normal"
    assert Config().resources == {}
    assert cfg.resources == EXAMPLE_RESOURCES
    assert (cfg.state_dir, cfg.rest_url) == ("", "")


def test_every_key_of_every_section_is_in_the_file():
    data = raw()
    top = {f.name for f in msgspec.structs.fields(Config)}
    assert set(SECTIONS) | set(TABLES) | NOT_SETTINGS <= top
    for f in msgspec.structs.fields(Config):
        if f.name in NOT_SETTINGS:
            assert f.name not in data
            continue
        assert f.name in data, f"top-level key {f.name} is missing from {FILE}"
    for name, struct in SECTIONS.items():
        for f in msgspec.structs.fields(struct):
            assert f.name in data[name], f"key {name}.{f.name} is missing from {FILE}"
    for name, struct in TABLES.items():
        assert data[name], f"{FILE} shows no [{name}.NAME] table"
        for entry, table in data[name].items():
            for f in msgspec.structs.fields(struct):
                assert f.name in table, f"key {name}.{entry}.{f.name} is missing from {FILE}"


def test_every_key_has_a_comment():
    lines = FILE.read_text().splitlines()
    key = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*=")
    for i, line in enumerate(lines):
        m = key.match(line)
        if not m:
            continue
        above = next((p for p in reversed(lines[:i]) if p.strip()), "")
        assert above.lstrip().startswith("#"), f"{FILE}:{i + 1}: key {m.group(1)} has no comment above it"


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "xce.toml"
    p.write_text(text)
    return p


def _fails(path: Path, *words: str) -> str:
    with pytest.raises(ConfigError) as e:
        load(path)
    msg = e.value.message
    assert str(path) in msg, msg
    for w in words:
        assert w in msg, (w, msg)
    return msg


def test_unknown_key_in_a_section_names_file_key_and_reason(tmp_path):
    text = FILE.read_text().replace("[worker]\n", "[worker]\nheartbeet = 2.0\n", 1)
    _fails(_write(tmp_path, text), "key worker", "heartbeet", "unknown field")


def test_unknown_top_level_key_names_file_key_and_reason(tmp_path):
    _fails(_write(tmp_path, 'stat_dir = "/var/lib/xce"\n' + FILE.read_text()), "stat_dir", "unknown field")


def test_the_internal_source_field_is_not_a_key(tmp_path):
    _fails(_write(tmp_path, 'source = "/elsewhere.toml"\n' + FILE.read_text()), "key source", "unknown field")


def test_wrongly_typed_value_names_file_key_and_reason(tmp_path):
    text = FILE.read_text().replace("heartbeat = 1.0", 'heartbeat = "fast"', 1)
    _fails(_write(tmp_path, text), "key worker.heartbeat", "Expected `float`, got `str`")


def test_bad_value_names_file_key_and_reason(tmp_path):
    text = FILE.read_text().replace('mem = ""', 'mem = "4X"', 1)
    _fails(_write(tmp_path, text), "key worker.mem", "unknown unit")
    text = FILE.read_text().replace('durability = "mmap"', 'durability = "sync"', 1)
    _fails(_write(tmp_path, text), "key controller.durability", "must be 'mmap' or 'fsync'")
    text = FILE.read_text().replace("peers = []", 'peers = ["10.0.0.2:7702"]', 1)
    _fails(_write(tmp_path, text), "key controller.peer_addresses", "one ROUTER endpoint per entry")
    text = FILE.read_text().replace("lost_after = 0.0", "lost_after = 2.0", 1)
    _fails(_write(tmp_path, text), "key controller.lost_after", "must exceed unknown_after (3.0 s)")
    text = FILE.read_text().replace("unknown_after = 0.0", "unknown_after = -1", 1)
    _fails(_write(tmp_path, text), "key controller.unknown_after", "must be >= 0 seconds")


def test_not_toml_names_the_file(tmp_path):
    _fails(_write(tmp_path, "[worker\n"), "not valid TOML")


def test_host_groups_and_queue_host_lists_are_checked_at_load(tmp_path):
    base = FILE.read_text()
    groups = base.replace("host_groups = {}", 'host_groups = { gpu = ["node3", "node4"] }', 1)
    text = groups.replace("hosts = []", 'hosts = ["gpus/"]', 1)
    _fails(_write(tmp_path, text), "key queues.normal.hosts", "unknown host group gpus (host_groups: gpu)")
    text = base.replace("host_groups = {}", 'host_groups = { a = ["b/"] }', 1)
    _fails(_write(tmp_path, text), "key host_groups.a", "unknown host group b")
    text = groups.replace("hosts = []", 'hosts = ["~gpu"]', 1)
    _fails(_write(tmp_path, text), "key queues.normal.hosts", "names no host to take exclusions")
    cfg = load(_write(tmp_path, groups.replace("hosts = []", 'hosts = ["all", "~gpu/"]', 1)))
    hs = cfg.queue_hosts("normal")
    assert "node1" in hs and "node3" not in hs and cfg.queue_hosts("reclaim") is None


def test_site_host_attributes_are_declared_resources(tmp_path):
    base = FILE.read_text()
    text = base.replace("attrs = {}", 'attrs = { gpu_model = "a100" }', 1)
    _fails(_write(tmp_path, text), "key worker.attrs.gpu_model", '[resources.gpu_model] kind = "attribute"')
    _fails(_write(tmp_path, base.replace("attrs = {}", 'attrs = { type = "X86_64" }', 1)),
           "key worker.attrs.type", "builtin attribute (set worker.type)")
    declared = text + '\n[resources.gpu_model]\nkind = "attribute"\n'
    cfg = load(_write(tmp_path, declared.replace('type = ""', 'type = "X86_64"', 1)))
    assert cfg.host_attrs() == {"type": "X86_64", "gpu_model": "a100"}
    assert cfg.site_resources()["gpu_model"].kind == "attribute" and "gpu_model" not in cfg.host_virtual()
    _fails(_write(tmp_path, declared.replace('kind = "attribute"\n', 'kind = "attribute"\ntotal = 2\n')),
           "key resources.gpu_model", "no scope or total")


def test_a_numeric_site_attribute_is_declared_with_its_type_and_given_as_a_number(tmp_path):
    """LSF's lsf.shared TYPE: [resources.NAME] kind = "attribute", type = "numeric" makes select[]
    compare it as a number; a worker's value must then be one (and a string attribute's a string)."""
    base = FILE.read_text() + '\n[resources.cores]\nkind = "attribute"\ntype = "numeric"\n' \
        '\n[resources.arch]\nkind = "attribute"\n'
    cfg = load(_write(tmp_path, base.replace("attrs = {}", 'attrs = { cores = 16, arch = "zen4" }', 1)))
    assert cfg.host_attrs() == {"cores": 16, "arch": "zen4"}
    assert cfg.site_resources()["cores"].unit == "count" and cfg.site_resources()["arch"].unit == "string"
    _fails(_write(tmp_path, base.replace("attrs = {}", 'attrs = { cores = "many" }', 1)),
           "key worker.attrs.cores", "resources.cores is numeric: give a number, got 'many'")
    _fails(_write(tmp_path, base.replace("attrs = {}", "attrs = { arch = 4 }", 1)),
           "key worker.attrs.arch", "resources.arch is a string attribute: give a string, got 4")
    _fails(_write(tmp_path, base.replace('cores]\nkind = "attribute"\ntype = "numeric"', 'cores]\nkind = "attribute"\ntype = "number"')),
           "key resources.cores.type", "must be 'string' or 'numeric'")
    _fails(_write(tmp_path, base + '\n[resources.lic]\ntype = "string"\n'),
           "key resources.lic.type", "a virtual resource is a count")


def test_a_leader_keeps_the_office_as_long_as_no_follower_may_elect_another(tmp_path):
    """The leader's fallback follows a widened election timeout (at 5,000 hosts a 2-4 s timeout
    left 1 s fallbacks as seconds with no leader while a loaded follower answered late)."""
    from xce.site.config import ControllerConf

    assert Config().leader_fallback() == 1.0
    assert Config(controller=ControllerConf(election_timeout=(2.0, 4.0))).leader_fallback() == 2.0
    assert Config(controller=ControllerConf(election_timeout=(2.0, 4.0), leader_fallback=0.5)).leader_fallback() == 0.5
    text = FILE.read_text().replace("leader_fallback = 0.0", "leader_fallback = -1", 1)
    _fails(_write(tmp_path, text), "key controller.leader_fallback", "must be >= 0")
