"""The rule table (toolkeeper/shell/rules.py, rules.toml): loading, user files, mistakes named."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.errors import ConfigError
from toolkeeper.shell import RuleTable, ShellEffect, analyze
from toolkeeper.shell.rules import shipped_rules


def test_the_shipped_table_knows_common_programs_and_wrappers() -> None:
    table = shipped_rules()
    for name in ("ls", "cat", "grep", "git", "rm", "curl", "find", "sed", "python"):
        assert name in table.programs, name
    for name in ("env", "timeout", "sudo", "xargs", "nice"):
        assert name in table.wrappers, name
    assert "push" in table.programs["git"].subcommands
    assert "--upload-pack" in table.programs["git"].subcommands["fetch"].open_when


def test_a_user_entry_replaces_the_shipped_one_whole(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[programs.cat]\noperands = "write"\n')
    table = RuleTable.load([rules])
    analysis = analyze("cat notes.txt", cwd=str(tmp_path), roots=[str(tmp_path)], rules=table)
    assert analysis.effect is ShellEffect.WRITES_WITHIN_ROOTS


def test_a_user_file_can_turn_a_program_into_a_wrapper(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[wrappers.retry]\nvalues = ["-n"]\n')
    table = RuleTable.load([rules])
    (command,) = analyze(
        "retry -n 3 git push", cwd=str(tmp_path), roots=[str(tmp_path)], rules=table
    ).commands
    assert (command.name, command.subcommand) == ("git", "push")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[programs.x]\noperand = "read"\n', "unknown key(s) ['operand']"),
        ('[programs.x]\noperands = "sometimes"\n', "operands = 'sometimes'"),
        ('[programs.x]\nhandler = "magic"\n', "handler = 'magic'"),
        ('[programs.x]\nrepository = "maybe"\n', "repository must be read or write"),
        ('[wrappers.x]\nvalue = ["-n"]\n', "unknown key(s) ['value']"),
        ("[programs.x\n", "cannot read shell rules"),
    ],
)
def test_mistakes_in_a_rule_file_name_the_key_and_the_fix(
    tmp_path: Path, text: str, named: str
) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(text)
    with pytest.raises(ConfigError) as caught:
        RuleTable.load([rules])
    assert named in str(caught.value)
    assert str(rules) in str(caught.value)


def test_a_missing_rule_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read shell rules"):
        RuleTable.load([tmp_path / "absent.toml"])


def test_without_the_shipped_table_everything_is_unknown(tmp_path: Path) -> None:
    table = RuleTable.load([], include_shipped=False)
    analysis = analyze("ls", cwd=str(tmp_path), roots=[str(tmp_path)], rules=table)
    assert analysis.effect is ShellEffect.OPEN_WORLD
    assert not analysis.commands[0].known
