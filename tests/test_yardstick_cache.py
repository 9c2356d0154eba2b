"""The yardsticks' disk cache (netsim.learning.yardstick_cache): where it lives, what it keys
on, that a value read back is bit for bit the one computed, that a bad record is computed
again, and that a run whose yardsticks are cached does not import scikit-learn.

Every test here runs in its own cache directory (``cache`` fixture), inside the session's
(tests/conftest.py), so none of them touches the user's cache."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from netsim.errors import NetsimError
from netsim.learning import baselines, central_dp, yardstick_cache
from netsim.learning.baselines import LearningBaselines, learning_baselines
from netsim.learning.central_dp import CentralDPBaseline, central_dp_baseline
from netsim.learning.yardstick_cache import (
    YARDSTICKS,
    array_digest,
    cache_directory,
    cached,
    clear_directory,
    load_record,
    record_path,
    store_record,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory of this test, and empty in-process caches."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("NETSIM_CACHE_DIR", str(directory))
    baselines.clear_cache()
    central_dp.clear_cache()
    yield directory
    baselines.clear_cache()
    central_dp.clear_cache()


def split(n: int = 160, d: int = 4, seed: int = 0, cut: int = 120):
    """A small separable train/test split with 0/1 labels."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = (x @ np.arange(1.0, d + 1) > 0).astype(np.int64)
    return x[:cut], y[:cut], x[cut:], y[cut:]


def bits(value: object) -> tuple:
    """A dataclass's fields with every float as its 8 bytes (NaN as NaN: JSON keeps no
    payload), so that == is bit-for-bit equality."""
    fields = value.__dict__.values()
    return tuple(
        ("nan" if math.isnan(v) else struct.pack("<d", v)) if isinstance(v, float) else v
        for v in fields
    )


def records(directory: Path) -> list[Path]:
    return sorted((directory / YARDSTICKS).glob("*.json"))


def refuse(*_: object, **__: object) -> None:
    raise AssertionError("computed although the cache holds the value")


class TestCacheDirectory:
    def test_the_variable_names_it_and_off_or_empty_turn_it_off(self, monkeypatch, tmp_path):
        monkeypatch.setenv("NETSIM_CACHE_DIR", str(tmp_path / "mine"))
        assert cache_directory() == tmp_path / "mine"
        for off in ("off", "OFF", "", "  "):
            monkeypatch.setenv("NETSIM_CACHE_DIR", off)
            assert cache_directory() is None

    def test_default_is_the_xdg_cache_home_else_home_dot_cache(self, monkeypatch, tmp_path):
        monkeypatch.delenv("NETSIM_CACHE_DIR")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert cache_directory() == tmp_path / "xdg" / "netsim"
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        for unusable in ("", "relative/path"):  # the XDG rule: only an absolute path counts
            monkeypatch.setenv("XDG_CACHE_HOME", unusable)
            assert cache_directory() == tmp_path / "home" / ".cache" / "netsim"

    def test_the_test_session_never_uses_the_users_cache(self):
        assert "NETSIM_CACHE_DIR" in os.environ
        assert cache_directory() != Path.home() / ".cache" / "netsim"

    def test_a_run_writes_its_records_where_the_variable_says(self, cache):
        learning_baselines(*split())
        central_dp_baseline(*split(), epsilon=1.0, delta=1e-5)
        assert [p.name.split("-")[0] for p in records(cache)] == ["baselines", "central_dp"]
        assert clear_directory() == 2 and records(cache) == []

    def test_off_computes_every_time_and_writes_nothing(self, cache, monkeypatch):
        monkeypatch.setenv("NETSIM_CACHE_DIR", "off")
        calls = []
        for _ in range(2):
            assert cached("k", "key", LearningBaselines, lambda: calls.append(1) or VALUE) == VALUE
        assert len(calls) == 2 and not cache.exists()

    def test_an_unwritable_directory_is_computed_without_error(self, tmp_path, monkeypatch):
        blocker = tmp_path / "a-file"
        blocker.write_text("not a directory")
        monkeypatch.setenv("NETSIM_CACHE_DIR", str(blocker))
        baselines.clear_cache()
        assert learning_baselines(*split()).centralised > 0.9


VALUE = LearningBaselines(0.6, 0.95, "logistic regression (L2, C=1, lbfgs)")


class TestHits:
    def test_baselines_read_back_are_those_computed(self, cache, monkeypatch):
        data = split()
        monkeypatch.setenv("NETSIM_CACHE_DIR", "off")
        computed = learning_baselines(*data)
        baselines.clear_cache()
        monkeypatch.setenv("NETSIM_CACHE_DIR", str(cache))
        assert bits(learning_baselines(*data)) == bits(computed)  # computed and stored
        baselines.clear_cache()
        monkeypatch.setattr(baselines, "_compute", refuse)
        again = learning_baselines(*(a.copy() for a in data))
        assert again is not computed and bits(again) == bits(computed)

    @pytest.mark.parametrize("delta", [1e-5, 0.0])
    def test_central_dp_read_back_is_what_was_computed(self, cache, monkeypatch, delta):
        data = split(n=200, cut=150)
        monkeypatch.setenv("NETSIM_CACHE_DIR", "off")
        computed = central_dp_baseline(*data, epsilon=0.5, delta=delta, seed=2)
        central_dp.clear_cache()
        monkeypatch.setenv("NETSIM_CACHE_DIR", str(cache))
        central_dp_baseline(*data, epsilon=0.5, delta=delta, seed=2)
        central_dp.clear_cache()
        monkeypatch.setattr(central_dp, "_compute", refuse)
        again = central_dp_baseline(*data, epsilon=0.5, delta=delta, seed=2)
        assert again is not computed and bits(again) == bits(computed)

    @given(
        st.floats(0.0, 1.0) | st.just(math.nan),
        st.floats(0.0, 1.0, allow_subnormal=True) | st.just(math.nan),
        st.text(max_size=200),
        st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
        st.floats(allow_nan=True, allow_infinity=True),
    )
    def test_every_float_and_text_round_trips_bit_for_bit(
        self, majority, centralised, model, sensitivity, regularisation
    ):
        directory = Path(os.environ["NETSIM_CACHE_DIR"]) / "round-trip"
        value = LearningBaselines(majority, centralised, model)
        path = record_path(directory, "trip", "key")
        store_record(path, "trip", "key", value)
        assert bits(load_record(path, "trip", "key", LearningBaselines)) == bits(value)
        other = CentralDPBaseline(majority, model, 1.0, 0.0, regularisation, sensitivity,
                                  centralised)  # fmt: skip
        path = record_path(directory, "central_dp", "key")
        store_record(path, "central_dp", "key", other)
        assert bits(load_record(path, "central_dp", "key", CentralDPBaseline)) == bits(other)

    def test_optional_fields_round_trip(self, tmp_path):
        value = CentralDPBaseline(0.5, "m", 1.0, 0.0, 1e-4, 1.5, 0.52, None, None, None, None, 3)
        path = record_path(tmp_path, "central_dp", "k")
        store_record(path, "central_dp", "k", value)
        assert load_record(path, "central_dp", "k", CentralDPBaseline) == value


class TestKeys:
    def test_equal_content_is_one_key_and_any_change_another(self):
        data = split()
        key = baselines.disk_key(*data)
        assert baselines.disk_key(*(a.copy() for a in data)) == key
        moved = split(cut=121)  # another split of the same rows
        assert baselines.disk_key(*moved) != key
        nudged = [a.copy() for a in data]
        nudged[0][3, 1] = np.nextafter(nudged[0][3, 1], np.inf)  # one ulp of one value
        assert baselines.disk_key(*nudged) != key
        relabelled = [a.copy() for a in data]
        relabelled[3][0] = 1 - relabelled[3][0]
        assert baselines.disk_key(*relabelled) != key

    def test_epsilon_delta_and_seed_are_in_the_central_dp_key(self):
        data = split()
        key = central_dp.disk_key(*data, 1.0, 1e-5, 0)
        assert central_dp.disk_key(*data, 1.0, 1e-5, 0) == key
        others = [(1.0 + 2**-52, 1e-5, 0), (1.0, 1e-6, 0), (1.0, 0.0, 0), (1.0, 1e-5, 1)]
        assert len({central_dp.disk_key(*data, *point) for point in others} - {key}) == 4
        assert key != baselines.disk_key(*data)

    def test_the_code_and_the_libraries_are_in_the_key(self):
        data = split()
        key = yardstick_cache.record_key("k", data, {}, ("netsim.rng",), ("numpy",))
        other_code = yardstick_cache.record_key("k", data, {}, ("netsim.units",), ("numpy",))
        other_library = yardstick_cache.record_key("k", data, {}, ("netsim.rng",), ("scipy",))
        assert len({key, other_code, other_library}) == 3

    def test_other_numerical_kernels_are_another_key(self, monkeypatch):
        monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
        key = baselines.disk_key(*split())
        monkeypatch.setenv("OPENBLAS_CORETYPE", "Sandybridge")  # as tests.table_digests does
        assert baselines.disk_key(*split()) != key

    def test_a_sparse_matrix_hashes_by_content_not_by_index_order(self):
        dense = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
        coo = sp.coo_matrix(dense)
        shuffled = sp.coo_matrix((coo.data[::-1], (coo.row[::-1], coo.col[::-1])), coo.shape)
        assert array_digest(shuffled.tocsr()) == array_digest(sp.csr_matrix(dense))
        assert array_digest(sp.csr_matrix(dense)) != array_digest(dense)  # sparse ≠ dense

    def test_dtype_and_shape_are_hashed(self):
        x = np.arange(6.0)
        assert len({array_digest(x), array_digest(x.reshape(2, 3)),
                    array_digest(x.astype(np.float32))}) == 3  # fmt: skip


class TestArrayDigestMemo:
    def test_an_array_is_hashed_once_while_it_lives(self, monkeypatch):
        x = np.random.default_rng(1).normal(size=(50, 4))
        first = array_digest(x)
        monkeypatch.setattr(yardstick_cache.hashlib, "sha256", refuse)
        assert array_digest(x) == first

    def test_a_new_object_or_another_view_is_hashed_again(self, monkeypatch):
        x = np.random.default_rng(1).normal(size=(50, 4))
        array_digest(x)
        hashed = []
        real = yardstick_cache.hashlib.sha256
        monkeypatch.setattr(
            yardstick_cache.hashlib, "sha256", lambda *a: hashed.append(1) or real(*a)
        )
        array_digest(x.copy())
        array_digest(x[::2])
        array_digest(x.T)
        assert len(hashed) == 3

    def test_a_dead_array_leaves_no_entry(self):
        x = np.ones(7)
        array_digest(x)
        key = id(x)
        del x
        assert key not in yardstick_cache._MEMO.entries


class TestBadRecords:
    def stored(self, cache: Path) -> Path:
        learning_baselines(*split())
        baselines.clear_cache()
        (path,) = records(cache)
        return path

    @pytest.mark.parametrize(
        "damage",
        [
            lambda r: "",
            lambda r: r[: len(r) // 2],  # truncated
            lambda r: "\xff\xfe not json",
            lambda r: r.replace('"format": 2', '"format": 1'),
            lambda r: r.replace('"kind": "baselines"', '"kind": "central_dp"'),
            lambda r: r.replace('"key": "', '"key": "0'),
            lambda r: json.dumps({**json.loads(r), "value": [1, 2, 3]}),
            lambda r: json.dumps(
                {**json.loads(r), "value": {**json.loads(r)["value"], "majority": "0.5"}}
            ),
            lambda r: json.dumps(
                {**json.loads(r), "value": {**json.loads(r)["value"], "majority": 1}}
            ),  # an int is not a float
            lambda r: json.dumps(
                {**json.loads(r), "value": {**json.loads(r)["value"], "extra": 0.1}}
            ),
            lambda r: json.dumps(
                {**json.loads(r), "value": {"majority": 0.5, "model": "x"}}
            ),  # a field missing
        ],
    )
    def test_a_bad_record_is_computed_again_and_rewritten(self, cache, damage):
        path = self.stored(cache)
        good = path.read_text()
        path.write_text(damage(good))
        computed = []
        real = baselines._compute

        def counting(*args):
            computed.append(1)
            return real(*args)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(baselines, "_compute", counting)
            assert learning_baselines(*split()).centralised > 0.9
        assert computed == [1] and path.read_text() == good

    def forged(self, record: str, **fields: object) -> str:
        """``record`` with ``fields`` set in its value and its checksum made to match, as a
        forger who knows the format would."""
        data = json.loads(record)
        data["value"].update(fields)
        data["sha256"] = yardstick_cache.record_checksum(data["kind"], data["key"], data["value"])
        return json.dumps(data)

    @pytest.mark.parametrize(
        ("damage", "why"),
        [
            (lambda self, r: r.replace('"majority": 0.', '"majority": 0.0'), "checksum"),
            (lambda self, r: self.forged(r, majority=7.5), "majority 7.5 is not a fraction"),
            (lambda self, r: self.forged(r, centralised=-0.25), "not a fraction in"),
            (lambda self, r: self.forged(r, centralised=math.inf), "not a fraction in"),
        ],
    )
    def test_a_forged_record_is_refused_recomputed_and_named(self, cache, damage, why):
        """A record edited by hand fails its checksum; one forged with its checksum made to
        match but an accuracy outside [0, 1] is refused too. Either is computed again, and the
        lookup is recorded as replaced, with why (a run's manifest lists it)."""
        path = self.stored(cache)
        good = path.read_text()
        path.write_text(damage(self, good))
        yardstick_cache.start_recording()
        assert 0.9 < learning_baselines(*split()).centralised <= 1.0
        (use,) = yardstick_cache.recorded_uses()
        assert use.source == "replaced" and why in use.why, use
        assert path.read_text() == good
        baselines.clear_cache()
        yardstick_cache.start_recording()
        learning_baselines(*split())
        assert [u.source for u in yardstick_cache.recorded_uses()] == ["read"]

    def test_a_fifo_or_a_huge_file_is_refused_without_reading_it(self, cache):
        """A FIFO in a record's place is refused before it is opened (a run would wait on it
        for ever), and a file past the size limit before it is read."""
        path = self.stored(cache)
        path.unlink()
        os.mkfifo(path)
        found, why = yardstick_cache.read_record(path, "baselines", "k", LearningBaselines)
        assert found is None and why == "not a regular file"
        path.unlink()
        with path.open("wb") as file:
            file.truncate(2 * 1024**3)  # a sparse 2 GiB file: nothing is allocated
        found, why = yardstick_cache.read_record(path, "baselines", "k", LearningBaselines)
        assert found is None and why.startswith("2,147,483,648 bytes, more than")
        assert learning_baselines(*split()).centralised > 0.9  # computed again

    def test_clear_does_not_follow_a_symlinked_folder(self, cache, tmp_path):
        """`netsim cache clear` deletes records, never what a link leads to."""
        elsewhere = tmp_path / "precious"
        elsewhere.mkdir()
        (elsewhere / "thesis.json").write_text("{}")
        shutil.rmtree(cache / "yardsticks", ignore_errors=True)
        cache.mkdir(parents=True, exist_ok=True)
        (cache / "yardsticks").symlink_to(elsewhere)
        with pytest.raises(NetsimError, match=r"is a symbolic link; netsim cache clear does not"):
            clear_directory()
        assert (elsewhere / "thesis.json").is_file()
        (cache / "yardsticks").unlink()
        (cache / "yardsticks").mkdir()
        (cache / "yardsticks" / "link.json").symlink_to(elsewhere / "thesis.json")
        assert clear_directory() == 0 and (elsewhere / "thesis.json").is_file()

    def test_a_directory_in_place_of_a_record_is_computed(self, cache):
        path = self.stored(cache)
        path.unlink()
        path.mkdir()
        assert learning_baselines(*split()).centralised > 0.9


class TestConcurrentWriters:
    def test_writers_of_one_key_leave_a_whole_record_and_readers_never_see_part(self, tmp_path):
        # a record near the size limit (a real one is about 1 KiB), so writes take a while
        value = CentralDPBaseline(0.8, "method " * 9_000, 1.0, 1e-5, 1e-4, 0.4, 0.79, 0.2, 4.0,
                                  200, 1.234, 0)  # fmt: skip
        path = record_path(tmp_path, "central_dp", "k")
        seen: set[str] = set()
        done = threading.Event()

        def write() -> None:
            for _ in range(20):
                store_record(path, "central_dp", "k", value)

        def read() -> None:
            while not done.is_set():
                with contextlib.suppress(FileNotFoundError):
                    seen.add(path.read_text())

        reader = threading.Thread(target=read)
        reader.start()
        writers = [threading.Thread(target=write) for _ in range(4)]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join()
        done.set()
        reader.join()
        assert seen == {path.read_text()}  # only ever the whole record
        assert load_record(path, "central_dp", "k", CentralDPBaseline) == value
        assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left


SCENARIO = """
name: dola-cache
seed: 1
nodes: 8
duration: 10
topology: {kind: random_regular, degree: 4}
dola:
  data: {name: synthetic_ball, options: {examples: 400, features: 5}}
  algorithm: laplace
  epsilon: 1.0
  max_passes: 10
  regret_checkpoints: 0
"""

CHILD = """
import sys
from netsim.cli import main
code = main(["run", "-q", "--out", sys.argv[1], sys.argv[2]])
print("sklearn" in sys.modules)
sys.exit(code)
"""


def test_a_run_whose_yardsticks_are_cached_does_not_import_scikit_learn(cache, tmp_path):
    scenario = tmp_path / "dola.yaml"
    scenario.write_text(SCENARIO)
    environment = {**os.environ, "NETSIM_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    imported = []
    for out in ("first", "second"):
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(tmp_path / out), str(scenario)],
            capture_output=True, text=True, env=environment, cwd=REPO,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        imported.append(done.stdout.split()[-1])
    assert imported == ["True", "False"]  # the first run fits the model, the second reads it
    first, second = (
        pd.read_parquet(next((tmp_path / out).glob("*/dola_summary.parquet")))
        for out in ("first", "second")
    )
    pd.testing.assert_frame_equal(first, second, check_exact=True)


def test_netsim_cache_clear_deletes_the_records_and_nothing_else(cache, capsys, monkeypatch):
    from netsim.cli import main

    learning_baselines(*split())
    (cache / "mine.txt").write_text("a file of the user's")
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out == f"{cache}: 1 cached yardsticks deleted\n"
    assert records(cache) == [] and (cache / "mine.txt").exists()
    monkeypatch.setenv("NETSIM_CACHE_DIR", "off")
    assert main(["cache", "clear"]) == 0
    assert "the cache is off" in capsys.readouterr().out


def test_a_runs_manifest_says_which_yardsticks_came_from_the_cache(cache, tmp_path, capsys):
    """The first run computes its yardsticks, the second reads them (its manifest names each
    record's key); after a record is forged, the third refuses it, computes it again and says
    so in its manifest and its warnings."""
    import netsim.learning.central_dp as central_dp_module
    from netsim.cli import main

    scenario = tmp_path / "dola.yaml"
    scenario.write_text(SCENARIO)
    manifests = []
    for out in ("first", "second", "third"):
        if out == "third":
            (record,) = [p for p in records(cache) if p.name.startswith("baselines-")]
            data = json.loads(record.read_text())
            data["value"]["centralised"] = 7.5
            checksum = yardstick_cache.record_checksum("baselines", data["key"], data["value"])
            data["sha256"] = checksum
            record.write_text(json.dumps(data))
        baselines.clear_cache()
        central_dp_module.clear_cache()
        assert main(["run", "-q", "--out", str(tmp_path / out), str(scenario)]) == 0
        manifests.append(json.loads(next((tmp_path / out).glob("*/manifest.json")).read_text()))
    sources = [[(u["kind"], u["source"]) for u in m["yardsticks"]] for m in manifests]
    assert {s for _, s in sources[0]} == {"computed"} and {s for _, s in sources[1]} == {"read"}
    assert [u["key"] for u in manifests[0]["yardsticks"]] == [
        u["key"] for u in manifests[1]["yardsticks"]
    ]
    replaced = [u for u in manifests[2]["yardsticks"] if u["source"] == "replaced"]
    assert [u["kind"] for u in replaced] == ["baselines"]
    assert "centralised 7.5 is not a fraction" in replaced[0]["why"]
    assert any("yardstick cache: the baselines record" in w for w in manifests[2]["warnings"])
    summary = pd.read_parquet(next((tmp_path / "third").glob("*/dola_summary.parquet")))
    assert (summary.filter(like="accuracy").dropna(axis=1) <= 1.0).all().all()
