"""Configuration errors name the key (dotted path), show the bad value (never a token) and
say how to fix it; the standard mcpServers block is accepted inline or by path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkeeper.errors import ConfigError
from toolkeeper.gateway.config.settings import GatewayConfig, load_config

BASE = """
stdio_principal = "alice"

[principals.alice]
capabilities = ["items:read"]
token = "s3cret-alice-token"
"""


def write(tmp_path: Path, text: str, name: str = "gateway.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_for(tmp_path: Path, text: str, name: str = "gateway.toml") -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text, name))
    return caught.value


def test_a_valid_file_loads_with_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, BASE))
    assert config.home == tmp_path / ".toolkeeper"  # beside the file, not in the cwd
    assert (config.http.host, config.http.port, config.http.auth) == ("127.0.0.1", 8765, "token")
    assert config.principal("alice").capabilities == frozenset({"items:read"})
    assert config.base_dir == tmp_path
    assert "s3cret" not in repr(config)


def test_a_misspelt_key_is_named_with_the_key_it_resembles(tmp_path: Path) -> None:
    error = error_for(tmp_path, BASE + "\n[http]\nprot = 9000\n")
    assert error.key == "http.prot"
    assert "http.prot: Extra inputs are not permitted" in str(error)
    assert "fix: did you mean 'port'? rename 'prot' to 'port'" in str(error)


def test_an_unknown_key_lists_the_keys_allowed_there(tmp_path: Path) -> None:
    error = error_for(tmp_path, BASE + "\n[http]\nzzz = 1\n")
    assert "fix: remove it; the keys allowed here are host, port, path, auth," in str(error)


def test_a_wrong_type_shows_the_value_and_the_expected_kind(tmp_path: Path) -> None:
    error = error_for(tmp_path, BASE + '\n[http]\nport = "eighty"\n')
    assert (error.key, error.value) == ("http.port", "eighty")
    assert 'http.port = "eighty": Input should be a valid integer' in str(error)
    assert "fix: write a whole number" in str(error)


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    error = error_for(tmp_path, 'tools = "mod"\n' + BASE + "\n[http]\nport = 70000\n")
    message = str(error)
    assert "2 invalid settings" in message
    assert 'tools = "mod": Input should be a valid list' in message
    assert "http.port = 70000: Input should be less than or equal to 65535" in message


def test_a_principal_reference_must_exist(tmp_path: Path) -> None:
    unknown = BASE.replace('stdio_principal = "alice"', 'stdio_principal = "carol"')
    error = error_for(tmp_path, unknown)
    assert error.key == "stdio_principal"
    assert (
        "names principal 'carol', which is not under [principals] (known: alice); add "
        "[principals.carol] or name a known one"
    ) in str(error)


def test_token_values_are_never_shown(tmp_path: Path) -> None:
    both = error_for(tmp_path, BASE + 'token_env = "ALICE_TOKEN"\n')
    assert both.key == "principals.alice"
    assert "set one of token, token_env and token_file, not several" in str(both)
    misspelt = error_for(tmp_path, BASE + 'tokn = "another-s3cret"\n')
    assert "did you mean 'token'?" in str(misspelt)
    wrong_type = error_for(tmp_path, BASE.replace('"s3cret-alice-token"', "12345678"))
    assert wrong_type.value == "<hidden>"
    for error in (both, misspelt, wrong_type):
        assert "s3cret" not in str(error) and "12345678" not in str(error)


def test_open_http_is_refused_beyond_loopback(tmp_path: Path) -> None:
    open_wide = BASE + '\n[http]\nhost = "0.0.0.0"\nauth = "none"\nprincipal = "alice"\n'
    error = error_for(tmp_path, open_wide)
    assert error.key == "http"
    assert "auth = 'none' on host '0.0.0.0' would serve every tool to anyone" in str(error)
    anonymous = error_for(tmp_path, BASE + '\n[http]\nauth = "none"\n')
    assert "auth = 'none' needs principal = '<id>'" in str(anonymous)
    assert load_config(write(tmp_path, BASE + '\n[http]\nauth = "none"\nprincipal = "alice"\n'))


def test_a_token_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(
        write(
            tmp_path,
            BASE.replace("token = ", "token_env = ").replace(
                '"s3cret-alice-token"', '"ALICE_TOKEN"'
            ),
        )
    )
    with pytest.raises(ConfigError) as unset:
        config.tokens()
    assert unset.value.key == "principals.alice.token_env"
    assert "$ALICE_TOKEN, which is not set; export it" in str(unset.value)
    monkeypatch.setenv("ALICE_TOKEN", "from-env")
    assert config.tokens()["from-env"].id == "alice"


def test_two_principals_cannot_share_a_token(tmp_path: Path) -> None:
    twin = BASE + '\n[principals.bob]\ntoken = "s3cret-alice-token"\n'
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, twin)).tokens()
    assert "have the same token; give each principal its own" in str(caught.value)
    assert "s3cret" not in str(caught.value)


SERVERS = {"mcpServers": {"search": {"command": "python", "args": ["search.py"], "cwd": "srv"}}}


def test_mcp_servers_inline_and_by_path(tmp_path: Path) -> None:
    inline = BASE + '\n[mcpServers.search]\ncommand = "python"\nargs = ["search.py"]\ncwd = "srv"\n'
    config = load_config(write(tmp_path, inline))
    assert config.upstreams["search"].args == ("search.py",)
    assert config.upstreams["search"].cwd == str(tmp_path / "srv")
    (tmp_path / "servers.json").write_text(json.dumps(SERVERS))
    by_path = load_config(write(tmp_path, 'mcpServers = "servers.json"\n' + BASE, "other.toml"))
    assert by_path.upstreams == config.upstreams


def test_mcp_servers_errors_name_the_key_the_file_used(tmp_path: Path) -> None:
    both = error_for(tmp_path, BASE + '\n[mcpServers.a]\ncommand = "x"\nurl = "http://h"\n')
    assert both.key == "mcpServers.a"
    assert "give either command (a stdio server) or url" in str(both)
    missing = error_for(tmp_path, 'mcpServers = "nowhere.json"\n' + BASE)
    assert missing.key == "mcpServers"
    assert "cannot read" in str(missing) and "nowhere.json" in str(missing)
    servers = '\n[mcpServers.a]\ncommand = "x"\n[upstreams.b]\ncommand = "y"\n'
    twice = error_for(tmp_path, BASE + servers)
    assert "both mcpServers and upstreams are set; keep one of them" in str(twice)


def test_yaml_and_syntax_errors(tmp_path: Path) -> None:
    yaml_config = "stdio_principal: alice\nprincipals:\n  alice:\n    tenant: press\n"
    assert load_config(write(tmp_path, yaml_config, "gateway.yaml")).principal("alice").tenant == (
        "press"
    )
    broken = error_for(tmp_path, "[http\nport = 1\n")
    assert "gateway.toml is not valid TOML" in str(broken)
    assert "unsupported configuration type '.ini'" in str(error_for(tmp_path, "", "gateway.ini"))


def test_the_model_forbids_extra_keys_everywhere() -> None:
    for model in (
        GatewayConfig,
        *(
            field.annotation
            for field in GatewayConfig.model_fields.values()
            if isinstance(field.annotation, type) and hasattr(field.annotation, "model_config")
        ),
    ):
        assert model.model_config.get("extra") == "forbid"
