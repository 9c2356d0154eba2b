"""The command line ends in one message, exit status 2, when the ``netsim`` Python imports is
not a complete install (``netsim.installation``), instead of a traceback from deep inside.

The layout the user met is made in a virtual environment of its own (no pip: a fraction of a
second): setuptools' editable install is a finder that Python consults after the folders on
its path, so a leftover ``site-packages/netsim`` without ``__init__.py`` (numba's caches that
pip does not uninstall) is taken for ``netsim`` and hides the editable install. A folder
without ``__init__.py`` merely ahead on the path would not do it: a regular package anywhere
on the path wins over a namespace package, which is why the finder is part of the layout.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sysconfig
import tomllib
import venv
from pathlib import Path
from types import SimpleNamespace

from conftest import SUBPROCESS_HANG_LIMIT

from netsim.installation import check_installation, installation_problem

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"

#: An editable install's finder, as setuptools installs one from a ``.pth`` file: ``netsim``
#: and the modules directly inside it are found in the checkout, and only after Python has
#: looked through the folders on its path (the finder is appended to ``sys.meta_path``).
FINDER = """\
import sys
from importlib.machinery import PathFinder
from importlib.util import spec_from_file_location

PACKAGE = {package!r}


class CheckoutFinder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "netsim":
            return spec_from_file_location(
                name, PACKAGE + "/__init__.py", submodule_search_locations=[PACKAGE]
            )
        if name.rpartition(".")[0] == "netsim":
            return PathFinder.find_spec(name, [PACKAGE])
        return None


sys.meta_path.append(CheckoutFinder)
"""

#: numba's caches as a run of the quick-start scenario leaves them in an installed netsim.
LEFTOVER_CACHES = (
    "__pycache__/event_queue.heap_push-50.py311.nbi",
    "protocols/__pycache__/broadcast.spread-128.py311.nbi",
    "protocols/__pycache__/broadcast.spread-128.py311.1.nbc",
)


def console_script() -> str:
    """The ``netsim`` command as pip writes it: import the entry point named in
    ``pyproject.toml`` and exit with what it returns."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]["scripts"]
    module, function = scripts["netsim"].split(":")
    return f"import sys\nfrom {module} import {function}\nsys.exit({function}())\n"


def environment(tmp_path: Path, metadata: dict[str, str]) -> tuple[Path, Path]:
    """A virtual environment in ``tmp_path/venv`` without pip, whose site-packages holds
    netsim-ppml's metadata (``metadata``: file name → text) and, through a ``.pth`` file, the
    packages netsim imports (this interpreter's, without any netsim); its python and its
    site-packages folder."""
    home = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(home)
    packages = Path(sysconfig.get_path("purelib", vars={"base": home, "platbase": home}))
    info = packages / "netsim_ppml-0.1.0.dist-info"
    info.mkdir()
    for name, text in {"METADATA": "Metadata-Version: 2.1\nName: netsim-ppml\nVersion: 0.1.0\n",
                       "INSTALLER": "pip\n", **metadata}.items():  # fmt: skip
        (info / name).write_text(text)
    dependencies = tmp_path / "dependencies"
    dependencies.mkdir()
    for folder in map(Path, {*site.getsitepackages(), site.getusersitepackages()}):
        for entry in folder.iterdir() if folder.is_dir() else ():
            if (
                entry.name.startswith(("netsim", "__editable__", "_netsim"))
                or entry.suffix == ".pth"
            ):
                continue
            if not (dependencies / entry.name).exists():
                (dependencies / entry.name).symlink_to(entry)
    (packages / "dependencies.pth").write_text(f"{dependencies}\n")
    return home / "bin" / "python", packages


def editable_environment(tmp_path: Path) -> tuple[Path, Path]:
    """:func:`environment` with an editable install of this checkout."""
    direct_url = f'{{"dir_info": {{"editable": true}}, "url": "file://{REPO}"}}'
    python, packages = environment(tmp_path, {"direct_url.json": direct_url})
    (packages / "_netsim_checkout_finder.py").write_text(
        FINDER.format(package=str(REPO / "netsim"))
    )
    (packages / "__editable__.netsim_ppml-0.1.0.pth").write_text("import _netsim_checkout_finder\n")
    return python, packages


def run(python: Path, *arguments: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python *arguments`` as a user runs it: no PYTHONPATH, outside the checkout."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        [str(python), *map(str, arguments)], capture_output=True, text=True, cwd=cwd, env=env,
        timeout=SUBPROCESS_HANG_LIMIT, check=False,
    )  # fmt: skip


def test_a_leftover_folder_hiding_an_editable_install_is_named_in_one_message(tmp_path):
    python, packages = editable_environment(tmp_path)
    script = tmp_path / "venv" / "bin" / "netsim"
    script.write_text(console_script())
    # the editable install works: netsim is the checkout's
    done = run(python, "-c", "import netsim; print(netsim.__file__)", cwd=tmp_path)
    assert done.stdout == f"{REPO / 'netsim' / '__init__.py'}\n", done.stderr
    # what pip leaves of a wheel's netsim after a run: caches in folders without __init__.py
    leftover = packages / "netsim"
    for cache in LEFTOVER_CACHES:
        (leftover / cache).parent.mkdir(parents=True, exist_ok=True)
        (leftover / cache).write_bytes(b"\0")
    expected = (
        f"netsim: error: {leftover} has no __init__.py, yet Python takes it for the netsim "
        f"package (a namespace package), hiding the netsim at {REPO / 'netsim'} (netsim-ppml "
        f"0.1.0, an editable install of {REPO}). {leftover} holds only caches (3 files under "
        "__pycache__, such as numba's), the kind of leftover pip leaves when it uninstalls a "
        f"netsim that has run. Remove it (rm -r {leftover}) and run netsim again; if that is "
        f"not enough, reinstall: {python} -m pip install -e {REPO}\n"
    )
    for command in ([script], ["-m", "netsim"]):  # the console script, python -m netsim
        done = run(python, *command, "validate", QUICKSTART, cwd=tmp_path)
        assert (done.returncode, done.stderr, done.stdout) == (2, expected, ""), command
    shutil.rmtree(leftover)  # as the message says: the command runs
    done = run(python, script, "validate", QUICKSTART, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_copy_in_site_packages_that_the_metadata_does_not_list_is_named(tmp_path):
    """netsim-ppml is installed in editable mode, yet Python finds a full copy of netsim in
    site-packages first (one no installer recorded): the copy runs, and says so."""
    direct_url = f'{{"dir_info": {{"editable": true}}, "url": "file://{REPO}"}}'
    python, packages = environment(tmp_path, {"direct_url.json": direct_url})
    copy = packages / "netsim"
    shutil.copytree(REPO / "netsim", copy, ignore=shutil.ignore_patterns("__pycache__"))
    done = run(python, "-m", "netsim", "--version", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == (
        f"netsim: error: Python imports netsim from {copy}, a copy that the installed "
        f"netsim-ppml did not put there (netsim-ppml 0.1.0, an editable install of {REPO}), "
        f"and it hides that install. Remove the copy (rm -r {copy}) and run netsim again; if "
        f"that is not enough, reinstall: {python} -m pip install -e {REPO}\n"
    )


def test_a_wheels_package_listed_in_its_record_passes(tmp_path):
    """The same copy, installed as a wheel installs it (its RECORD lists it): no message."""
    files = sorted(
        path.relative_to(REPO).as_posix()
        for path in (REPO / "netsim").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )
    record = "".join(f"{name},,\n" for name in files)
    python, packages = environment(tmp_path, {"RECORD": record})
    shutil.copytree(
        REPO / "netsim", packages / "netsim", ignore=shutil.ignore_patterns("__pycache__")
    )
    done = run(python, "-m", "netsim", "--version", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "netsim 0.1.0\n", "")


def test_a_folder_with_files_of_its_own_is_not_to_be_removed(tmp_path):
    """A folder named netsim in the current directory (the user's) is taken for the package by
    ``python -m netsim`` just as well: the message says to rename it, never to remove it."""
    folder = tmp_path / "netsim"
    (folder / "runs").mkdir(parents=True)
    (folder / "runs" / "notes.txt").write_text("mine")
    problem = installation_problem(SimpleNamespace(__path__=[str(folder)]))  # type: ignore[arg-type]
    assert problem is not None
    assert f"{folder} holds files other than caches (such as {folder}/runs/notes.txt)" in problem
    assert f"Rename or move {folder} (if it is in the current directory" in problem
    assert "rm -r" not in problem


def test_this_checkout_passes_the_check():
    check_installation()
    assert installation_problem() is None
