"""``durq --help`` and every command's help read well."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

import durq
from durq.cli import COMMANDS, main
from worker.support import Durq


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        out.append((*prefix, name))
        if isinstance(command, click.Group):
            out += _commands(command, (*prefix, name))
    return out


def test_durq_help_lists_every_command_with_its_whole_first_sentence(durq_cli: Durq) -> None:
    shown = durq_cli.run("--help")
    assert shown.code == 0, shown
    text = shown.stdout
    assert text.startswith("Usage: durq [OPTIONS] COMMAND [ARGS]...")
    assert "Start here:" in text
    assert "durq worker myapp.tasks:app" in text  # the \b block keeps its lines
    commands = text.split("Commands:", 1)[1]
    for name in COMMANDS:
        assert re.search(rf"^  {name}\s+\S", commands, re.M), f"{name} missing"
    assert "..." not in commands  # first sentences are wrapped, never cut
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100


def test_the_help_table_of_the_commands_says_what_each_command_s_own_help_says() -> None:
    # `durq --help` lists the commands from durq.cli.COMMANDS without importing them
    ctx = click.Context(main)
    for name, (_module, first_sentence) in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None and command.name == name, name
        assert not command.hidden, name
        assert command.get_short_help_str(limit=1000) == first_sentence, name


def test_a_command_added_to_the_group_is_listed_and_runs() -> None:
    # a command a later change adds with main.add_command, outside durq.cli.COMMANDS
    @click.command()
    def extra() -> None:
        """Print the word extra."""
        click.echo("extra")

    main.add_command(extra)
    try:
        shown = CliRunner().invoke(main, ["--help"])
        assert re.search(r"^  extra\s+Print the word extra\.$", shown.output, re.M)
        assert CliRunner().invoke(main, ["extra"]).output == "extra\n"
    finally:
        del main.commands["extra"]


def test_durq_version_prints_the_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"durq, version {durq.__version__}"


@pytest.mark.parametrize("path", _commands(main), ids=" ".join)
def test_every_command_has_help_that_says_what_it_does(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "-h"], prog_name="durq", terminal_width=80)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: durq {' '.join(path)} ")
    description = result.output.split("\n\n")[1].strip()
    assert len(description) > 10
    assert description[0].isupper() and description.endswith(".")


def test_an_unknown_command_is_an_error_that_names_the_commands() -> None:
    result = CliRunner().invoke(main, ["wrker"])
    assert result.exit_code == 2
    assert "No such command 'wrker'" in result.output
