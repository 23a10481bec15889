"""Secret providers and the broker: values by reference, first provider wins, always redacted."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.invocation import Principal
from toolkeeper.secrets.providers import (
    CallableSecretProvider,
    EnvSecretProvider,
    FileSecretProvider,
    ResolvedSecrets,
    SecretBroker,
    default_broker,
)
from toolkeeper.secrets.redaction import Redactor

TOKEN = "ghp_0123456789abcdef"


# -- EnvSecretProvider --------------------------------------------------------------------


def test_env_provider_upper_cases_the_name_after_the_prefix() -> None:
    provider = EnvSecretProvider(prefix="APP_", environ={"APP_GITHUB_TOKEN": TOKEN})
    assert provider.get("github_token") == TOKEN


def test_env_provider_accepts_the_exact_name() -> None:
    provider = EnvSecretProvider(prefix="APP_", environ={"APP_github_token": TOKEN})
    assert provider.get("github_token") == TOKEN


def test_env_provider_prefers_the_upper_case_variable() -> None:
    environ = {"APP_GITHUB_TOKEN": "upper-value", "APP_github_token": "exact-value"}
    assert EnvSecretProvider(prefix="APP_", environ=environ).get("github_token") == "upper-value"


def test_env_provider_never_reads_outside_its_prefix() -> None:
    provider = EnvSecretProvider(prefix="APP_", environ={"GITHUB_TOKEN": TOKEN})
    assert provider.get("github_token") is None
    assert provider.get("GITHUB_TOKEN") is None


def test_env_provider_reads_the_live_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    provider = EnvSecretProvider(prefix="TK_TEST_")
    assert provider.get("late") is None
    monkeypatch.setenv("TK_TEST_LATE", TOKEN)
    assert provider.get("late") == TOKEN


# -- FileSecretProvider -------------------------------------------------------------------


def _secret_file(directory: Path, name: str, text: str, mode: int = 0o600) -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def test_file_provider_reads_one_file_per_name_stripping_trailing_newlines(
    tmp_path: Path,
) -> None:
    _secret_file(tmp_path, "github_token", TOKEN + "\n")
    _secret_file(tmp_path, "pem", "line one\nline two\r\n")
    provider = FileSecretProvider(tmp_path)
    assert provider.get("github_token") == TOKEN
    assert provider.get("pem") == "line one\nline two"
    assert provider.get("absent") is None


@pytest.mark.parametrize(
    "name", ["../outside", "..", "sub/inside", "/etc/passwd", "", ".", "a\0b", "x..y"]
)
def test_file_provider_refuses_names_that_could_leave_the_directory(
    tmp_path: Path, name: str
) -> None:
    secrets_dir = tmp_path / "secrets"
    (secrets_dir / "sub").mkdir(parents=True)
    _secret_file(tmp_path, "outside", "outside-value")
    _secret_file(secrets_dir / "sub", "inside", "nested-value")
    assert FileSecretProvider(secrets_dir).get(name) is None


def test_file_provider_refuses_a_symlink_pointing_outside(tmp_path: Path) -> None:
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    outside = _secret_file(tmp_path, "outside", "outside-value")
    (secrets_dir / "escape").symlink_to(outside)
    assert FileSecretProvider(secrets_dir).get("escape") is None


def test_file_provider_follows_symlinks_inside_like_a_kubernetes_mount(tmp_path: Path) -> None:
    # Kubernetes mounts name -> ..data/name -> ..<timestamp>/name, all inside the directory.
    versioned = tmp_path / "..2024_01_01"
    versioned.mkdir()
    _secret_file(versioned, "github_token", TOKEN)
    (tmp_path / "..data").symlink_to(versioned.name)
    (tmp_path / "github_token").symlink_to("..data/github_token")
    assert FileSecretProvider(tmp_path).get("github_token") == TOKEN


def test_file_provider_warns_once_about_world_readable_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _secret_file(tmp_path, "loose", TOKEN, mode=0o644)
    _secret_file(tmp_path, "tight", TOKEN, mode=0o600)
    provider = FileSecretProvider(tmp_path)
    with caplog.at_level(logging.WARNING, logger="toolkeeper.secrets.providers"):
        assert provider.get("loose") == TOKEN
        assert provider.get("loose") == TOKEN
        assert provider.get("tight") == TOKEN
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "loose" in warnings[0]
    assert "-rw-r--r--" in warnings[0]
    assert TOKEN not in caplog.text


def test_file_provider_ignores_a_directory_with_the_name(tmp_path: Path) -> None:
    (tmp_path / "token").mkdir()
    assert FileSecretProvider(tmp_path).get("token") is None


def test_file_provider_on_a_missing_directory_has_nothing(tmp_path: Path) -> None:
    assert FileSecretProvider(tmp_path / "not-mounted").get("token") is None


# -- CallableSecretProvider ---------------------------------------------------------------


def test_callable_provider_delegates_to_the_function() -> None:
    vault = {"github_token": TOKEN}
    provider = CallableSecretProvider(vault.get)
    assert provider.get("github_token") == TOKEN
    assert provider.get("other") is None


# -- SecretBroker -------------------------------------------------------------------------


def test_first_provider_that_has_the_name_wins() -> None:
    broker = SecretBroker(
        [
            CallableSecretProvider({"a": "first-a-value"}.get),
            CallableSecretProvider({"a": "second-a-value", "b": "second-b-value"}.get),
        ]
    )
    resolved = broker.resolve(["a", "b"])
    assert dict(resolved.values) == {"a": "first-a-value", "b": "second-b-value"}
    assert resolved.missing == ()


def test_missing_names_are_listed_in_request_order_once() -> None:
    broker = SecretBroker([CallableSecretProvider({"b": "b-value-1"}.get)])
    resolved = broker.resolve(["z", "b", "a", "z"])
    assert resolved.missing == ("z", "a")
    assert dict(resolved.values) == {"b": "b-value-1"}


def test_a_broker_without_providers_resolves_nothing() -> None:
    assert SecretBroker().resolve(["x"]).missing == ("x",)


def test_every_resolved_value_is_registered_with_the_redactor() -> None:
    redactor = Redactor()
    broker = SecretBroker([CallableSecretProvider({"t": TOKEN}.get)], redactor=redactor)
    assert broker.redactor is redactor
    broker.resolve(["t"])
    assert TOKEN in redactor
    assert redactor.redact_text(f"Bearer {TOKEN}") == "Bearer [REDACTED]"


def test_a_raising_provider_counts_as_not_having_the_name_and_its_error_is_redacted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def flaky(name: str) -> str | None:
        raise ConnectionError(f"vault refused {name}: session {TOKEN} expired")

    broker = SecretBroker(
        [
            CallableSecretProvider({"session": TOKEN}.get),
            CallableSecretProvider(flaky),
            CallableSecretProvider({"db": "db-password"}.get),
        ]
    )
    broker.resolve(["session"])
    with caplog.at_level(logging.WARNING, logger="toolkeeper.secrets.providers"):
        resolved = broker.resolve(["db"])
    assert dict(resolved.values) == {"db": "db-password"}
    assert "ConnectionError: vault refused db: session [REDACTED] expired" in caplog.text
    assert TOKEN not in caplog.text


def test_empty_and_non_string_values_fall_through_to_the_next_provider(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = SecretBroker(
        [
            CallableSecretProvider({"a": ""}.get),
            CallableSecretProvider({"a": 12345678}.get),  # type: ignore[arg-type]
            CallableSecretProvider({"a": "real-a-value"}.get),
        ]
    )
    with caplog.at_level(logging.WARNING, logger="toolkeeper.secrets.providers"):
        assert broker.resolve(["a"]).values["a"] == "real-a-value"
    assert "returned int" in caplog.text
    assert "12345678" not in caplog.text


def test_a_too_short_value_is_still_bound_but_cannot_be_redacted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = SecretBroker([CallableSecretProvider({"pin": "42"}.get)])
    with caplog.at_level(logging.WARNING, logger="toolkeeper.secrets.redaction"):
        resolved = broker.resolve(["pin"])
    assert resolved.values["pin"] == "42"
    assert "2-character secret" in caplog.text


def test_default_broker_reads_the_prefixed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKEEPER_SECRET_GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("DEPLOY_KEY", "unprefixed-value")
    resolved = default_broker().resolve(["github_token", "deploy_key"])
    assert dict(resolved.values) == {"github_token": TOKEN}
    assert resolved.missing == ("deploy_key",)


# -- values never shown -------------------------------------------------------------------


def test_resolved_values_are_read_only() -> None:
    resolved = ResolvedSecrets({"t": TOKEN})
    with pytest.raises(TypeError):
        resolved.values["t"] = "other"  # type: ignore[index]


def test_reprs_show_names_never_values() -> None:
    broker = SecretBroker([CallableSecretProvider({"github_token": TOKEN}.get)])
    resolved = broker.resolve(["github_token", "absent"])
    context = ToolContext(
        request_id="req_1",
        call_id="call_1",
        contract_ref="github.create_issue@1.0.0",
        principal=Principal(id="agent-1"),
        secrets=resolved.values,
    )
    for text in (repr(resolved), str(resolved), repr(context), str(context), repr(broker)):
        assert TOKEN not in text
    assert repr(resolved) == "ResolvedSecrets(names=['github_token'], missing=['absent'])"
    assert context.secrets["github_token"] == TOKEN


def test_provider_reprs_name_their_source(tmp_path: Path) -> None:
    assert repr(EnvSecretProvider(prefix="APP_")) == "EnvSecretProvider(prefix='APP_')"
    assert repr(FileSecretProvider(tmp_path)) == f"FileSecretProvider({str(tmp_path)!r})"
    assert "dict.get" in repr(CallableSecretProvider({}.get))


def test_an_undecodable_file_is_logged_and_treated_as_missing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "binary").write_bytes(b"\xff\xfe not utf-8")
    broker = SecretBroker([FileSecretProvider(tmp_path)])
    with caplog.at_level(logging.WARNING, logger="toolkeeper.secrets.providers"):
        assert broker.resolve(["binary"]).missing == ("binary",)
    assert "UnicodeDecodeError" in caplog.text
