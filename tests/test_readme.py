"""The README is a front page whose commands run as pasted: its ten-line walk prints what the
README shows, the guide's snippets for reading runs (docs/guide/runs.md) run in a fresh
directory, and (slow) its first two commands, installing netsim and then installing it again in
editable mode, run in a fresh virtual environment."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from conftest import SUBPROCESS_HANG_LIMIT

from netsim.storage import is_complete_run

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: The guide page and section whose snippets read runs in pandas.
RUNS_GUIDE = REPO / "docs" / "guide" / "runs.md"
SECTION = "## Reading a run in pandas"
#: The README's section with the ten-line scenario, its command and its output.
WALK_SECTION = "## A random walk on a churn trace"
#: The front page stays a front page: what it held beyond this went to the docs site.
MOST_LINES = 200


def section_blocks(text: str, heading: str) -> list[tuple[str, str]]:
    """The fenced code blocks (language, code) of the Markdown section under ``heading``."""
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    body = text[start : end if end >= 0 else len(text)]
    return re.findall(r"```(\w+)\n(.*?)```", body, flags=re.DOTALL)


def test_the_readme_is_a_front_page() -> None:
    """Under 200 lines, the test suite's size stated in one place (its Tests section, which the
    count's updates edit), and the performance history on its own page, not here."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < MOST_LINES
    counts = re.findall(r"\b\d[\d,]* tests\b", text)
    assert len(counts) == 1, counts
    tests_section = text[text.index("\n## Tests\n") :]
    assert counts[0] in tests_section.split("\n## ")[1]
    for page in (REPO / "docs").rglob("*.md"):
        assert not re.search(r"\b\d,\d{3} tests\b", page.read_text(encoding="utf-8")), page
    assert "[Performance](docs/performance.md)" in text
    assert "[Data and citations](docs/citations.md)" in text


def normalised_run_output(text: str) -> str:
    """``netsim run``'s summary with its one machine-dependent figure, the wall time, masked."""
    return re.sub(r"^wall time: [\d.]+ s$", "wall time: … s", text.strip(), flags=re.MULTILINE)


def test_the_readmes_walk_prints_what_the_readme_shows(tmp_path: Path) -> None:
    """The ten-line scenario, saved at the top of a checkout as the README says, run by the
    README's command: the output is the README's (the wall time aside). A change to netsim's
    summary or to the walk's numbers shows here; paste the printed output into the README."""
    blocks = section_blocks(README.read_text(encoding="utf-8"), WALK_SECTION)
    assert [language for language, _ in blocks] == ["yaml", "sh", "text"]
    (_, scenario), (_, command), (_, shown) = blocks
    assert len(scenario.strip().splitlines()) == 10
    (tmp_path / "traces").symlink_to(REPO / "traces")
    (tmp_path / "walk.yaml").write_text(scenario, encoding="utf-8")
    words = shlex.split(command.strip())
    assert words == ["netsim", "run", "walk.yaml"]
    done = subprocess.run(
        [sys.executable, "-m", "netsim", *words[1:]], cwd=tmp_path, capture_output=True,
        text=True, timeout=SUBPROCESS_HANG_LIMIT, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert normalised_run_output(done.stdout) == normalised_run_output(shown), (
        f"the README shows another output; this run printed:\n{done.stdout}"
    )
    assert is_complete_run(tmp_path / done.stdout.strip().splitlines()[-1])


def test_the_guides_snippets_for_reading_runs_run_as_pasted(tmp_path, monkeypatch):
    blocks = section_blocks(RUNS_GUIDE.read_text(encoding="utf-8"), SECTION)
    assert [language for language, _ in blocks] == ["sh", "python", "python", "python"]
    for name in ("scenarios", "traces"):  # what the snippets' relative paths name
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict[str, object] = {}
    for language, code in blocks:
        if language == "sh":
            result = subprocess.run(
                ["bash", "-e", "-c", code], capture_output=True, text=True,
                timeout=SUBPROCESS_HANG_LIMIT, env={**os.environ, "MPLBACKEND": "Agg"}, check=False,
            )  # fmt: skip
            assert result.returncode == 0, result.stderr
        else:
            exec(compile(code, str(RUNS_GUIDE), "exec"), namespace)
    tables, long = namespace["tables"], namespace["long"]
    assert (tables["samples"]["duration"] == 1800.0).all()  # type: ignore[index]
    assert set(long["duration"]) == {1800.0}  # type: ignore[index]
    assert namespace["result"]["broadcasts"]["update"].size >= 2  # type: ignore[index]
    assert (tmp_path / "runs" / "quickstart-30min" / "manifest.json").is_file()


#: The README's first two commands, in their order: what a new user runs first.
INSTALL_AND_RUN = "python3 -m pip install . && netsim run scenarios/quickstart.yaml"
INSTALL_EDITABLE_AND_TEST = "python3 -m pip install -e '.[test]' && python3 -m pytest -q"
#: What the test runs of the second: the editable install, without the test extra.
INSTALL_EDITABLE = "python3 -m pip install -e ."
#: pip installing netsim's dependencies (downloading them when pip's cache does not hold them).
INSTALL_LIMIT = 3 * SUBPROCESS_HANG_LIMIT


def copy_of_the_checkout(target: Path) -> Path:
    """The checkout's tracked files, as they are in the working tree, copied to ``target``
    (what a clone holds, uncommitted edits included; no run directory, no virtual environment)."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True,
        timeout=SUBPROCESS_HANG_LIMIT,
    ).stdout.decode()  # fmt: skip
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file() or source.is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name, follow_symlinks=False)
    return target


def new_users_environment(home: Path, cache: Path) -> dict[str, str]:
    """The environment of a user who has just activated the virtual environment ``home``:
    nothing of this test session's (its PYTHONPATH, netsim's and numba's cache folders), a
    cache folder of their own, and pip's cache shared with this user's (installs go faster)."""
    pip_cache = os.environ.get("PIP_CACHE_DIR") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pip"
    )
    kept = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "PYTHONHOME")
        and not key.startswith(("NETSIM_", "NUMBA_"))
    }
    return {
        **kept,
        "PATH": f"{home / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "VIRTUAL_ENV": str(home),
        "XDG_CACHE_HOME": str(cache),
        "PIP_CACHE_DIR": pip_cache,
    }


@pytest.mark.slow
def test_the_readmes_install_commands_run_in_order_in_a_fresh_environment(tmp_path):
    """``pip install .`` and the quick-start run, then ``pip install -e``, in a fresh virtual
    environment from a copy of the checkout, as a new user runs them. Once, the first run left
    numba's caches inside the installed package; ``pip install -e`` uninstalled the rest, and
    the leftover ``site-packages/netsim`` hid the editable install (``No module named
    'netsim.protocols.gossip'``).

    The second command installs ``-e .``, not ``-e '.[test]'``, and runs no tests: the test
    extra (JAX, Dask, Sphinx, …) adds minutes of installing, and what is checked is the
    install, not the suite. A few minutes with pip's cache warm."""
    readme = README.read_text(encoding="utf-8")
    top = readme[: readme.index("\n## ")]
    assert re.findall(r"```sh\n(.*?)\n```", top, flags=re.DOTALL) == [
        INSTALL_AND_RUN,
        INSTALL_EDITABLE_AND_TEST,
    ]
    checkout = copy_of_the_checkout(tmp_path / "netsim-checkout")
    home = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(home)
    env = new_users_environment(home, tmp_path / "cache")

    def shell(command: str, limit: float = SUBPROCESS_HANG_LIMIT, cwd: Path = checkout) -> str:
        done = subprocess.run(
            ["bash", "-e", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
            timeout=limit, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{command}:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
        return done.stdout.strip()

    packages = Path(shell("python3 -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))'"))
    run = shell(INSTALL_AND_RUN, INSTALL_LIMIT).splitlines()[-1]
    assert is_complete_run(checkout / run), run
    # the run wrote nothing into the installed package (pip would not uninstall it)
    (record,) = packages.glob("netsim_ppml-*.dist-info/RECORD")
    listed = {line.split(",")[0] for line in record.read_text().splitlines()}
    written = {
        path.relative_to(packages).as_posix()
        for path in (packages / "netsim").rglob("*")
        if path.is_file()
    }
    assert written <= listed, sorted(written - listed)[:10]

    shell(INSTALL_EDITABLE, INSTALL_LIMIT)
    assert not (packages / "netsim").exists()  # nothing of the wheel's package is left
    assert shell("netsim validate scenarios/quickstart.yaml").startswith(
        "scenarios/quickstart.yaml: valid scenario"
    )
    run = shell(f"netsim run scenarios/quickstart.yaml --out {tmp_path / 'runs'}").splitlines()[-1]
    assert is_complete_run(Path(run)), run
    # outside the checkout (whose folder Python would find first): the installed netsim
    assert shell("python3 -c 'import netsim; print(netsim.__file__)'", cwd=tmp_path) == (
        f"{checkout / 'netsim' / '__init__.py'}"
    )
