"""Hypothesis throws malformed profiles and variants at the loaders: only perfgate's own errors come out."""

from pathlib import Path

import tomlkit
import tomllib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfgate.errors import ConfigError
from perfgate.profiles.load import load_profile
from perfgate.profiles.variants import load_variants

ROOT = Path(__file__).resolve().parent.parent
BASE = tomllib.loads((ROOT / "baselines" / "rtxpro6000-x8" / "kimi-k2.5.toml").read_text())

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(-1e3, 1e6, allow_nan=False),
                    st.text(max_size=12), st.lists(st.integers(-2, 5), max_size=3))


def _paths(d, prefix=()):
    for k, v in d.items():
        yield prefix + (k,)
        if isinstance(v, dict):
            yield from _paths(v, prefix + (k,))


PATHS = sorted(_paths(BASE))


def _mutate(doc, path, value):
    d = doc
    for k in path[:-1]:
        d = d[k]
    if value is None:
        del d[path[-1]]
    else:
        d[path[-1]] = value


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(PATHS), scalars), min_size=1, max_size=4))
def test_mutated_profiles_fail_only_with_config_errors(tmp_path_factory, edits):
    root = tmp_path_factory.mktemp("proj")
    (root / "baselines" / "hw").mkdir(parents=True)
    (root / "fixtures" / "prompts").mkdir(parents=True)
    (root / "fixtures" / "prompts" / "random-ids-128.jsonl").write_text('{"input_ids": [1, 2]}\n')
    doc = tomlkit.parse((ROOT / "baselines" / "rtxpro6000-x8" / "kimi-k2.5.toml").read_text())
    for path, value in edits:
        try:
            _mutate(doc, path, value)
        except (KeyError, TypeError, AttributeError):
            continue
    p = root / "baselines" / "hw" / "m.toml"
    p.write_text(tomlkit.dumps(doc))
    try:
        load_profile(p)
    except ConfigError as e:
        assert str(p) in str(e)  # names the file


@given(st.binary(max_size=400))
def test_garbage_bytes_as_profile(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("g")
    (root / "baselines" / "hw").mkdir(parents=True)
    p = root / "baselines" / "hw" / "g.toml"
    p.write_bytes(data)
    try:
        load_profile(p)
    except ConfigError as e:
        assert str(p) in str(e)


@settings(max_examples=100)
@given(st.dictionaries(st.text(min_size=1, max_size=8), st.one_of(scalars, st.dictionaries(
    st.text(min_size=1, max_size=8), scalars, max_size=3)), max_size=4))
def test_mutated_variants_fail_only_with_config_errors(tmp_path_factory, table):
    root = tmp_path_factory.mktemp("v")
    p = root / "variants.toml"
    doc = {"schema_version": 1, "variants": {"x": table}}
    try:
        p.write_text(tomlkit.dumps(doc))
    except Exception:
        return
    try:
        load_variants(p)
    except ConfigError as e:
        assert str(p) in str(e)
