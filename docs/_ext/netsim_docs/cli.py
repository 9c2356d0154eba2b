"""The command-line reference, read from :func:`netsim.cli.build_parser`: every command and
sub-command with its description, its ``--help`` text and a table of its arguments."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager

from netsim_docs.markdown import code, fenced, prose, slug, table, target

#: The width ``--help`` is rendered at, so the page does not depend on the terminal.
HELP_WIDTH = 90


@contextmanager
def help_width(columns: int) -> Iterator[None]:
    """argparse wraps help at ``$COLUMNS``; fix it while the page is written."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        yield
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(name, parser) of the sub-commands of ``parser``, in the order they were added."""
    for action in parser._actions:  # argparse has no public way to list sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def argument_rows(parser: argparse.ArgumentParser) -> list[list[str]]:
    """One row per argument: how it is written, what it does, its default."""
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            continue
        if action.option_strings:
            value = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
            written = ", ".join(code(option + value) for option in action.option_strings)
        else:
            written = code(action.metavar or action.dest)
        default = action.default
        shown = "" if default in (None, False) or action.nargs == 0 else code(default)
        # %(choices)s and the like, expanded as --help expands them
        text = parser._get_formatter()._expand_help(action) if action.help else ""
        rows.append([written, prose(text), shown])
    return rows


def command_sections(name: str, parser: argparse.ArgumentParser, level: int) -> Iterator[str]:
    """The section of one command, then those of its sub-commands."""
    yield target(slug("cli", *name.split()))
    yield f"{'#' * level} {code(name)}\n"
    yield fenced(parser.format_help(), "text")
    rows = argument_rows(parser)
    if rows:
        yield table(["argument", "meaning", "default"], rows)
    for child_name, child in subcommands(parser):
        yield from command_sections(f"{name} {child_name}", child, level + 1)


def render() -> str:
    """The whole command-line reference page."""
    from netsim.cli import build_parser

    with help_width(HELP_WIDTH):
        parser = build_parser()
        sections = []
        for name, command in subcommands(parser):
            sections += list(command_sections(f"netsim {name}", command, 2))
        usage = parser.format_help()
    parts = [
        "# Command line\n",
        "Generated from `netsim.cli.build_parser()` when the site is built: every command "
        "with the text its `--help` prints. `python -m netsim …` is the same as `netsim …`.\n",
        fenced(usage, "text"),
        *sections,
    ]
    return "\n".join(parts)
