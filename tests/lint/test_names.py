"""TK101 reads names the way public MCP catalogs write them: verb first, after a server
prefix (``git_create_branch``), in a namespace (``mcp__github__create_issue``,
``github.create_issue``), or object first (``issue_read``); the verbs include those the
catalogs use (issue 11, "what hurt" 10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from toolkeeper.contract.model import ToolContract
from toolkeeper.lint import VERBS, lint_contract
from toolkeeper.lint.surface import action_tokens, name_tokens

CATALOGS = Path(__file__).parent / "catalogs"

_WORD = st.text("abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=10)
_OBJECT = _WORD.filter(lambda word: word not in VERBS)
_VERB = st.sampled_from(sorted(VERBS))
_PREFIX = st.sampled_from(["", "git_", "slack_", "github.", "crm:", "mcp__server__", "a/b/"])


def named(name: str) -> list[str]:
    contract = ToolContract(id=name, description="Read one thing and return it.")
    return [f.code for f in lint_contract(contract)]


@given(st.lists(_WORD, min_size=1, max_size=5))
def test_snake_kebab_and_camel_case_split_into_the_same_words(words: list[str]) -> None:
    camel = words[0] + "".join(word.capitalize() for word in words[1:])
    assert name_tokens("_".join(words)) == name_tokens("-".join(words)) == words
    assert name_tokens(camel) == words


@given(_PREFIX, st.lists(_WORD, min_size=1, max_size=4))
def test_an_explicit_namespace_is_not_part_of_the_action(prefix: str, words: list[str]) -> None:
    assume("_" not in prefix or prefix.endswith("__"))  # git_ is a word, not a namespace
    assert action_tokens(prefix + "_".join(words)) == words


@given(_PREFIX, _VERB, st.lists(_OBJECT, min_size=1, max_size=3))
def test_verb_object_names_state_an_action_in_every_namespace_style(
    prefix: str, verb: str, objects: list[str]
) -> None:
    assert "TK101" not in named(prefix + "_".join([verb, *objects]))


@given(_VERB, st.lists(_OBJECT, min_size=1, max_size=2))
def test_object_first_names_state_an_action(verb: str, objects: list[str]) -> None:
    assert "TK101" not in named("_".join([*objects, verb]))


@given(st.lists(_OBJECT, min_size=1, max_size=4))
def test_names_without_a_verb_are_flagged(objects: list[str]) -> None:
    assert "TK101" in named("_".join(objects))


def catalog_names(*files: str) -> set[str]:
    return {t["name"] for f in files for t in json.loads((CATALOGS / f).read_text())["tools"]}


@pytest.mark.parametrize(
    "name",
    sorted(
        catalog_names("mcp-server-git.json")
        - {"git_status", "git_log", "git_branch"}  # name a thing, not an action
    ),
)
def test_the_git_servers_prefixed_names_state_their_action(name: str) -> None:
    assert "TK101" not in named(name)


@pytest.mark.parametrize(
    "name",
    [
        "fork_repository",
        "dismiss_notification",
        "request_copilot_review",
        "issue_read",
        "issue_write",
        "printEnv",
        "sampleLLM",
        "map_search_places",
        "map_poi_extract",
        "exec_in_container",
        "recreate_container",
        "mcp__github__create_issue",
    ],
)
def test_verbs_and_orders_of_public_catalogs_are_known(name: str) -> None:
    """Names from github-mcp-server, the everything server, Baidu Maps and the Docker MCP
    Registry entry (tests/lint/catalogs), and Claude Code's namespacing."""
    assert "TK101" not in named(name)


@pytest.mark.parametrize(
    "name", ["git_status", "map_weather", "directory_tree", "container_stats", "structuredContent"]
)
def test_names_of_public_catalogs_that_state_no_action_are_still_flagged(name: str) -> None:
    assert "TK101" in named(name)
