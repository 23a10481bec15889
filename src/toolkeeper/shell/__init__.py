"""The governed shell's analysis: parse a command, normalize what it runs, judge it by Cedar.

parse.py       tree-sitter-bash → simple commands (words, redirections, cwd); refusals
rules.py       RuleTable: what known programs' words mean (rules.toml, user files)
normalize.py   simple command + rules → SimpleCommand (paths, network, effect)
command.py     SimpleCommand, ShellEffect
analysis.py    analyze() → CommandAnalysis (its effect, summary and account)
policy.py      ShellPolicy and decide(): Cedar on program, subcommand, paths, network
"""

from toolkeeper.shell.analysis import CommandAnalysis, analyze
from toolkeeper.shell.command import ShellEffect, SimpleCommand
from toolkeeper.shell.policy import ShellDecision, ShellPolicy, decide
from toolkeeper.shell.rules import Rule, RuleTable, Wrapper

__all__ = [
    "CommandAnalysis",
    "Rule",
    "RuleTable",
    "ShellDecision",
    "ShellEffect",
    "ShellPolicy",
    "SimpleCommand",
    "Wrapper",
    "analyze",
    "decide",
]
