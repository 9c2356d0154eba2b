"""The documentation site (docs/) builds in strict mode, and its generated reference covers
what the code defines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SUBPROCESS_HANG_LIMIT

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
GENERATED = DOCS / "reference" / "_generated"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built as the docs say: every warning (a broken link or cross-reference, a
    docstring that is not valid reST) fails the build."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", str(DOCS), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"sphinx failed:\n{done.stdout[-5000:]}\n{done.stderr[-20000:]}"
    return out


def test_the_site_builds_without_warnings(site: Path) -> None:
    for page in (
        "index",
        "tutorial",
        "howto/churn-trace",
        "explanation/privacy",
        "reference/scenario-files",
        "reference/_generated/api/netsim.privacy",
    ):
        assert (site / f"{page}.html").is_file(), page


def test_the_scenario_key_reference_lists_every_section_and_component(site: Path) -> None:
    text = (GENERATED / "scenario-keys.md").read_text(encoding="utf-8")
    for key in (
        "`transfer_time`",
        "`kill_probability`",
        "`sample_every`",
        "`epsilon`",
        "`thresholds`",
        "`window`",
    ):
        assert key in text, key
    for component in (
        "`k_out`",
        "`stunner`",
        "`service`",
        "`visit_counter`",
        "`k_norm_l2`",
        "`spambase`",
    ):
        assert component in text, component
    # constraints and defaults come from the pydantic fields
    assert "| `kill_probability` | number | `0.0` | ≥ 0; ≤ 1 |" in text
    assert "| `nodes` | integer | **required** | ≥ 1 |" in text
    # the prose reference (scenarios/README.md) is part of the site
    html = (site / "reference" / "scenario-files.html").read_text(encoding="utf-8")
    assert "Sweeps: the" in html and "Canonical trace format" in html


def test_the_table_reference_lists_every_table(site: Path) -> None:
    text = (GENERATED / "event-tables.md").read_text(encoding="utf-8")
    for table in (
        "walk_summary",
        "samples",
        "churn",
        "messages_lost",
        "broadcasts",
        "privacy_ledger",
        "dola_rounds",
        "mi_ogd_summary",
        "trace_assignment",
    ):
        assert f"## `{table}`" in text, table
    assert "| `mean_propagating` | `double` |" in text


def test_the_cli_reference_lists_every_command(site: Path) -> None:
    text = (GENERATED / "cli.md").read_text(encoding="utf-8")
    for command in (
        "netsim validate",
        "netsim run",
        "netsim sweep",
        "netsim report",
        "netsim trace info",
        "netsim trace convert",
        "netsim trace synth",
    ):
        assert f"## `{command}`" in text or f"### `{command}`" in text, command
    assert "--scheduler ADDRESS" in text


def test_the_privacy_page_agrees_with_the_mechanisms() -> None:
    """docs/explanation/privacy.md says which mechanism is ε-DP, (ε, δ)-DP or neither; the
    table it includes is generated from the events the mechanisms return, and its prose must
    say the same."""
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        from netsim_docs import privacy
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    stated = {
        name: [event.guarantee for event in privacy.guarantees(release)]
        for name, release in privacy.registered_mechanisms()
    }
    assert stated == {
        "l1": ["epsilon-DP", "epsilon-DP"],
        "l2_paper": ["epsilon-DP", "none"],  # ε-DP in one dimension only
        "k_norm_l2": ["epsilon-DP", "epsilon-DP"],
        "gaussian": ["(epsilon,delta)-DP", "(epsilon,delta)-DP"],
    }
    prose = (DOCS / "explanation" / "privacy.md").read_text(encoding="utf-8")
    assert "in more it is **not** ε-DP" in prose
    assert "is ε-DP for the L1 sensitivity" in prose and "is ε-DP for the L2" in prose
    assert "(`gaussian` in a scenario) is (ε, δ)-DP" in prose


def test_the_home_page_shows_the_readme_commands() -> None:
    """docs/index.md repeats the README's two opening commands; they must stay the same."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8").split("```")
    commands = [readme[i].strip().removeprefix("sh").strip() for i in range(1, len(readme), 2)]
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    for command in commands[:2]:
        assert command in index, command


def test_the_written_pages_have_no_unresolved_cross_references(site: Path) -> None:
    """Sphinx renders a role it cannot resolve as plain code, without a link, and says
    nothing unless in nitpicky mode (which the docstrings' ~90 short names would fail). The
    pages written by hand — tutorial, how-tos, explanation — must resolve every one."""
    import re

    xref = re.compile(r'(<a [^>]*>)?\s*<code class="xref [^"]*"[^>]*>(.*?)</code>', re.S)
    unresolved = {}
    for page in site.rglob("*.html"):
        relative = page.relative_to(site).as_posix()
        if relative.startswith(("reference/_generated/", "_")):
            continue
        names = [
            re.sub("<[^>]+>", "", m.group(2))
            for m in xref.finditer(page.read_text(encoding="utf-8"))
            if not m.group(1)
        ]
        if names:
            unresolved[relative] = names
    assert unresolved == {}


def _python_block_after(page: Path, heading: str) -> str:
    """The first ``python`` code block after ``heading`` in the Markdown ``page``."""
    text = page.read_text(encoding="utf-8")
    after = text[text.index(heading) :]
    start = after.index("```python\n") + len("```python\n")
    return after[start : after.index("```", start)]


def test_the_dask_how_tos_local_cluster_recipe_runs_as_written(tmp_path: Path) -> None:
    """The recipe, run as a script from the repository's root (its output directory moved to
    a temporary one): a complete sweep on a LocalCluster, collected."""
    pytest.importorskip("distributed")
    recipe = _python_block_after(DOCS / "howto" / "dask-sweep.md", "## From Python")
    assert 'if __name__ == "__main__":' in recipe
    script = tmp_path / "run_sweep.py"
    out = tmp_path / "runs"
    script.write_text(recipe.replace('OUT = Path("runs")', f"OUT = Path({str(out)!r})"))
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True,
        timeout=SUBPROCESS_HANG_LIMIT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-5000:]
    directory = out / "tutorial-gossip-period"
    assert done.stdout.startswith(f"{directory}: 6 runs, 0 failed\n"), done.stdout
    assert json.loads((directory / "sweep.json").read_text())["status"] == "complete"


#: The command the site is built with, as ``site`` runs it (``{docs} {out}`` are its paths).
BUILD_COMMAND = "python -m sphinx -W --keep-going -b html docs docs/_build/html"


def test_every_page_that_says_how_to_build_the_site_gives_the_tested_command() -> None:
    """The README gave the command without -W (warnings pass), docs/index.md with it."""
    import re

    for page in (ROOT / "README.md", DOCS / "index.md"):
        text = " ".join(page.read_text(encoding="utf-8").split())
        commands = re.findall(r"`(python -m sphinx[^`]*)`", text)
        assert commands == [BUILD_COMMAND], (page.name, commands)


def test_the_check_example_installs_the_package_that_registers_its_name() -> None:
    """``netsim check metropolis_hastings`` exits 2 unless the example package is installed;
    the example says so, and the checkout-only form it gives runs."""
    text = (DOCS / "components.md").read_text(encoding="utf-8")
    section = text[text.index("## 6. What is checked") : text.index("## 7.")]
    block = section[section.index("```sh\n") : section.index("netsim check metropolis_hastings")]
    assert "pip install ./examples/netsim-examples" in block
    assert "exits with 2" in section
    done = subprocess.run(
        [sys.executable, "-m", "netsim", "check", "netsim_examples.mh_walk:MetropolisHastingsWalk"],
        cwd=ROOT, capture_output=True, text=True, timeout=SUBPROCESS_HANG_LIMIT,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'examples/netsim-examples/src'}:{ROOT}"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PYTHONPATH=examples/netsim-examples/src netsim check" in " ".join(section.split())


def test_the_guides_stunner_figures_are_what_trace_info_prints(stunner_trace: Path) -> None:
    """The churn-trace guide once said sessions of median 7.4 min and mean 59 min (every online
    interval, those cut by a segment's edge at their cut length); ``netsim trace info`` prints
    6.3 and 47.5 min (sessions seen whole). The guide gives trace info's figures, and says so
    (docs/guide/churn-traces.md)."""
    import re

    done = subprocess.run(
        [sys.executable, "-m", "netsim", "trace", "info", str(stunner_trace)],
        cwd=ROOT, capture_output=True, text=True, timeout=SUBPROCESS_HANG_LIMIT, check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    printed = re.search(r"online sessions \((\d+) seen whole; (\d+) cut.*median ([\d.]+) min.*"
                        r"mean ([\d.]+) min", done.stdout)  # fmt: skip
    assert printed is not None, done.stdout
    _, cut, median, mean = printed.groups()
    guide = " ".join((DOCS / "guide" / "churn-traces.md").read_text(encoding="utf-8").split())
    assert (
        f"online sessions of median {median} min and mean {mean} min, as `netsim trace info` "
        "prints them: a session is one online interval seen whole inside its segment (the "
        f"{int(cut):,} intervals cut by a segment's start or end are left out"
    ) in guide
