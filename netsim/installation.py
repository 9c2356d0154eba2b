"""Whether the ``netsim`` that Python imports is a complete install of this package.

pip uninstalls only the files a wheel's ``RECORD`` lists. Files written later inside the
installed ``netsim/`` folder (numba's caches, before they moved to the user's cache folder)
stay, and so do the folders holding them, without their ``__init__.py``. An editable install
made afterwards is found by setuptools' finder, which Python consults only after the folders
on its path: the leftover ``site-packages/netsim`` is taken for ``netsim`` as a namespace
package, ``netsim/__init__.py`` never runs, and every subpackage with a leftover folder of its
own hides the real one (``No module named 'netsim.protocols.gossip'``). A module directly
inside the package, such as this one or the command line's, is still found through the
editable finder, so the command line calls :func:`check_installation` before anything else
and ends in one message naming the folders instead of a traceback.

On the normal path the check reads no file (a checkout, an editable install) or one small one
(a wheel's package is looked up in its distribution's ``RECORD``).
"""

from __future__ import annotations

import os
import site
import sys
from collections.abc import Sequence
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote, urlparse

from netsim.errors import InstallationError
from netsim.version import DISTRIBUTION

# json and shlex are imported where used: only an install that is not a checkout or an
# editable one reads its metadata, and only a message quotes paths.

#: The folder this module was found in: the package the command line runs from.
PACKAGE = Path(__file__).resolve().parent

#: At most this many entries of a leftover folder are looked at to describe it.
_WALK_LIMIT = 10_000


def check_installation(module: ModuleType | None = None) -> None:
    """Raise :class:`~netsim.errors.InstallationError` when the ``netsim`` Python imports
    (``module``, by default ``sys.modules["netsim"]``) is not this package, complete: a folder
    without ``__init__.py`` (a namespace package), a package of several folders, another copy
    than the one this module belongs to, or a copy in a site-packages folder that the installed
    distribution's metadata does not list. The message names the folders and what to do."""
    problem = installation_problem(module)
    if problem is not None:
        raise InstallationError(problem)


def installation_problem(module: ModuleType | None = None) -> str | None:
    """What :func:`check_installation` would raise, or None when the install is complete."""
    module = sys.modules["netsim"] if module is None else module
    init = getattr(module, "__file__", None)
    folders = [Path(folder).resolve() for folder in getattr(module, "__path__", ())]
    if init is None:
        return _namespace_problem(folders)
    if folders != [PACKAGE]:
        return _two_copies_problem(Path(init), folders)
    if PACKAGE.parent in _site_folders():
        return _metadata_problem()
    return None  # a checkout on the path, or an editable install's source: what was asked for


def _site_folders() -> set[Path]:
    """This interpreter's site-packages folders (where installers put packages)."""
    found = set(getattr(site, "getsitepackages", list)())
    if site.ENABLE_USER_SITE:
        found.add(site.getusersitepackages())
    return {Path(folder).resolve() for folder in found if folder}


def _installed() -> Distribution | None:
    try:
        return distribution(DISTRIBUTION)
    except PackageNotFoundError:
        return None


def _direct_url(dist: Distribution) -> dict[str, object]:
    """The install's ``direct_url.json`` (where pip installed it from), or ``{}``."""
    import json

    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return {}
    return direct if isinstance(direct, dict) else {}


def _local_folder(direct: dict[str, object]) -> Path | None:
    url = urlparse(str(direct.get("url", "")))
    return Path(unquote(url.path)) if url.scheme == "file" and "dir_info" in direct else None


def _editable_project(dist: Distribution) -> Path | None:
    """The project folder of an editable install, else None."""
    direct = _direct_url(dist)
    info = direct.get("dir_info")
    return _local_folder(direct) if isinstance(info, dict) and info.get("editable") else None


def _what_is_installed(dist: Distribution | None) -> str:
    """``netsim-ppml 0.1.0, an editable install of /src`` (or no distribution)."""
    if dist is None:
        return f"no {DISTRIBUTION} distribution is installed"
    project = _editable_project(dist)
    where = (
        f"an editable install of {project}"
        if project is not None
        else f"installed in {Path(str(dist.locate_file(''))).resolve()}"
    )
    return f"{DISTRIBUTION} {dist.version}, {where}"


def _reinstall(dist: Distribution | None) -> str:
    """The command that installs netsim again, as it was installed."""
    import shlex

    python = shlex.quote(sys.executable or "python3")
    if dist is not None and (project := _editable_project(dist)) is not None:
        return f"{python} -m pip install -e {shlex.quote(str(project))}"
    source = _local_folder(_direct_url(dist)) if dist is not None else None
    target = shlex.quote(str(source)) if source is not None else DISTRIBUTION
    return f"{python} -m pip install --force-reinstall --no-deps {target}"


def _join(items: Sequence[object]) -> str:
    names = [str(item) for item in items]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _leftover(folder: Path) -> tuple[str, bool]:
    """What ``folder`` holds, in words, and whether it holds only caches (safe to remove)."""
    caches, others = 0, []
    seen = 0
    for root, directories, files in os.walk(folder):
        seen += len(directories) + len(files)
        for name in files:
            if "__pycache__" in Path(root).relative_to(folder).parts:
                caches += 1
            else:
                others.append(Path(root) / name)
        if seen > _WALK_LIMIT:
            break
    if others:
        return f"{folder} holds files other than caches (such as {others[0]})", False
    if caches:
        files = "file" if caches == 1 else "files"
        return (
            f"{folder} holds only caches ({caches} {files} under __pycache__, such as numba's), "
            "the kind of leftover pip leaves when it uninstalls a netsim that has run",
            True,
        )
    return f"{folder} holds no files", True


def _namespace_problem(folders: list[Path]) -> str:
    dist = _installed()
    one = len(folders) == 1
    described = [_leftover(folder) for folder in folders]
    removable = [folder for folder, (_, safe) in zip(folders, described, strict=True) if safe]
    kept = [folder for folder, (_, safe) in zip(folders, described, strict=True) if not safe]
    steps = []
    if removable:
        steps.append(f"remove {'it' if one else 'those'} (rm -r {_join_quoted(removable)})")
    if kept:
        steps.append(
            f"rename or move {_join(kept)} (if {'it is' if len(kept) == 1 else 'they are'} in "
            "the current directory, running netsim from another one is enough)"
        )
    fix = " and ".join(steps)
    return (
        f"{_join(folders)} {'has' if one else 'have'} no __init__.py, yet Python takes "
        f"{'it' if one else 'them'} for the netsim package (a namespace package), hiding the "
        f"netsim at {PACKAGE} ({_what_is_installed(dist)}). "
        + "; ".join(text for text, _ in described)
        + f". {fix[0].upper()}{fix[1:]} and run netsim again; if that is not enough, "
        f"reinstall: {_reinstall(dist)}"
    )


def _join_quoted(folders: Sequence[Path]) -> str:
    import shlex

    return " ".join(shlex.quote(str(folder)) for folder in folders)


def _two_copies_problem(init: Path, folders: list[Path]) -> str:
    dist = _installed()
    return (
        f"Python imports netsim from {init} but netsim's modules from {PACKAGE} "
        f"(the package's folders: {_join(folders)}): two copies of netsim are mixed "
        f"({_what_is_installed(dist)}). Remove the copy you do not mean to run and run netsim "
        f"again; if that is not enough, reinstall: {_reinstall(dist)}"
    )


def _recorded(dist: Distribution) -> bool:
    """Whether ``dist`` installed this package: its RECORD lists ``netsim/__init__.py`` and
    that file, where the metadata puts it, is this package's."""
    record = dist.read_text("RECORD") or ""
    listed = any(line.startswith("netsim/__init__.py,") for line in record.splitlines())
    return listed and Path(str(dist.locate_file("netsim/__init__.py"))).resolve() == (
        PACKAGE / "__init__.py"
    )


def _metadata_problem() -> str | None:
    """A package in a site-packages folder must be the installed distribution's."""
    dist = _installed()
    if dist is None or (_editable_project(dist) is None and _recorded(dist)):
        return None  # installed as recorded, or by no installer: nothing says otherwise
    import shlex

    return (
        f"Python imports netsim from {PACKAGE}, a copy that the installed {DISTRIBUTION} did "
        f"not put there ({_what_is_installed(dist)}), and it hides that install. Remove the "
        f"copy (rm -r {shlex.quote(str(PACKAGE))}) and run netsim again; if that is not "
        f"enough, reinstall: {_reinstall(dist)}"
    )
