"""Secrets: a registered value never reaches the model, the ledger, artifacts or logs — not
as bytes, not encoded, not when an upstream server echoes the credential it was handed.

Every check reads what an attacker or an auditor would read — the envelope, the ledger's
SQLite files byte for byte, captured log lines, the upstream log file — and asks whether the
secret can be recovered from it by any covered decoding (`recoverable`): percent-decoding
(twice), HTML entities (twice), backslash escapes (twice, as text and as bytes), mojibake,
and every run of hex or base64 decoded at every alignment.
"""

from __future__ import annotations

import base64
import hashlib
import html
import html.entities
import io
import json
import logging
import os
import random
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

import anyio
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from toolkeeper import Principal, Proposal, ResultEnvelope, tool
from toolkeeper.cli import main
from toolkeeper.gateway.upstreams.stderr import upstream_log
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.harness import Harness
from toolkeeper.secrets import CallableSecretProvider, RedactingFilter, Redactor, SecretBroker

ALICE = Principal("alice", "acme")
FIXTURES = Path(__file__).parent / "fixtures"
ARTIFACT_SIZE = 20_000
"""Result text past the default artifact threshold (16 KB): the result is stored aside."""
PLACEHOLDER = "■"
"""One character no secret below contains: a placeholder that a secret could contain (the
default "[REDACTED]" holds "TED]") would make every redacted text look like a leak."""

secret_characters = st.characters(
    blacklist_categories=("Cs", "Cc"), blacklist_characters=PLACEHOLDER
)
secret_texts = st.text(secret_characters, min_size=6, max_size=24)
"""Any text an environment variable or a vault can hold. Six characters and more where whole
ledger files are searched: a shorter one occurs in their digests and timestamps by chance."""


# -- the oracle -------------------------------------------------------------------------------

_ESCAPE = re.compile(
    r"\\(u[0-9a-fA-F]{4}(?:\\u[dD][c-fC-F][0-9a-fA-F]{2})?|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}"
    r"|[0-7]{3}|.)",
    re.DOTALL,
)
_SHORT = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "a": "\a", "0": "\0"}


def _unescape(text: str, *, bytes_for_x: bool) -> bytes:
    """Backslash escapes undone, as bytes: ``\\xHH`` is a byte (a bytes repr) when
    `bytes_for_x`, else a code point (a str repr)."""
    out = bytearray()
    position = 0
    for match in _ESCAPE.finditer(text):
        out += text[position : match.start()].encode("utf-8", "surrogatepass")
        body = match.group(1)
        if body[0] == "u" and len(body) > 1:
            units = [int(u, 16) for u in re.findall(r"[0-9a-fA-F]{4}", body)]
            if len(units) == 2 and 0xD800 <= units[0] < 0xDC00:
                units = [0x10000 + ((units[0] - 0xD800) << 10) + (units[1] - 0xDC00)]
            out += "".join(map(chr, units)).encode("utf-8", "surrogatepass")
        elif body[0] == "U" and len(body) > 1:
            out += chr(min(int(body[1:], 16), 0x10FFFF)).encode("utf-8", "surrogatepass")
        elif body[0] == "x" and len(body) > 1:
            value = int(body[1:], 16)
            out += bytes([value]) if bytes_for_x else chr(value).encode()
        elif len(body) == 3 and body.isdigit():
            out.append(int(body, 8) & 0xFF)
        else:
            out += _SHORT.get(body, body).encode("utf-8", "surrogatepass")
        position = match.end()
    out += text[position:].encode("utf-8", "surrogatepass")
    return bytes(out)


def _text_views(text: str) -> Iterator[str | bytes]:
    yield text
    yield unquote(text)
    yield unquote(unquote(text))
    yield unquote_plus(text)
    yield unquote_plus(unquote_plus(text))
    yield html.unescape(text)
    yield html.unescape(html.unescape(text))
    for bytes_for_x in (False, True):
        once = _unescape(text, bytes_for_x=bytes_for_x)
        yield once
        yield _unescape(once.decode("utf-8", "replace"), bytes_for_x=bytes_for_x)
    for mojibake in ("latin-1", "cp1252"):
        # "replace", not "ignore": dropping the placeholder would join what surrounds it.
        yield text.encode(mojibake, "replace")
    for run in re.findall(r"[0-9a-fA-F]{8,}", text):
        for shift in (0, 1):
            digits = run[shift:]
            yield bytes.fromhex(digits[: len(digits) // 2 * 2])
    for source in {text, unquote(text).replace("\\/", "/")}:
        for run in re.findall(r"[A-Za-z0-9+/_-]{6,}", source):
            standard = run.replace("-", "+").replace("_", "/")
            for shift in range(4):
                chars = standard[shift:]
                chars = chars[: len(chars) - (len(chars) % 4 == 1)]  # a lone char is no byte
                yield base64.b64decode(chars + "=" * (-len(chars) % 4))


def recoverable(secret: str, text: str) -> bool:
    """Whether `secret` can be read back from `text` through any covered decoding, applied
    to the text itself and to it with one and two layers of JSON escaping undone (how the
    ledger stores a string that was itself escaped)."""
    raw = secret.encode()
    layers = [text]
    for _ in range(2):
        layers.append(_unescape(layers[-1], bytes_for_x=False).decode("utf-8", "replace"))
    for layer in layers:
        for view in _text_views(layer):
            if (secret in view) if isinstance(view, str) else (raw in view):
                return True
    return False


def ledger_text(home: Path) -> str:
    """Every byte of the ledger's SQLite files (database, WAL, shared memory), as text."""
    data = b"".join(p.read_bytes() for p in sorted(home.glob("ledger.db*")))
    return data.decode("utf-8", "replace")


def strings_in(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings_in(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings_in(item)


# -- the encodings a tool or an upstream may put a secret in ------------------------------

Encoder = Callable[[str, random.Random], str]


def _utf16_units(char: str) -> list[int]:
    data = char.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def _json_escape(char: str) -> str:
    return "".join(f"\\u{unit:04x}" for unit in _utf16_units(char))


def _json_partly(secret: str, rng: random.Random) -> str:
    """Some characters ``\\u``-escaped, the rest as `json.dumps` writes them."""
    return "".join(
        _json_escape(c) if rng.random() < 0.5 else json.dumps(c, ensure_ascii=False)[1:-1]
        for c in secret
    )


def _entity(char: str, rng: random.Random) -> str:
    name = html.entities.codepoint2name.get(ord(char))
    options = [f"&#{ord(char)};", f"&#x{ord(char):X};", f"&#x{ord(char):x};"]
    options += [f"&{name};"] if name else []
    if char not in "&<>\"'":
        options.append(char)
    return rng.choice(options)


def _base64_inside(secret: str, rng: random.Random) -> str:
    """Base64 of a blob holding the secret at a random offset, either alphabet, padded or
    not — an MCP blob resource, an HTTP Basic header, a JWT."""
    blob = rng.randbytes(rng.randint(0, 5)) + secret.encode() + rng.randbytes(rng.randint(0, 5))
    encoded = (base64.urlsafe_b64encode if rng.random() < 0.5 else base64.b64encode)(blob)
    text = encoded.decode()
    return text.rstrip("=") if rng.random() < 0.5 else text


def _lower_escapes(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), text)


ENCODINGS: dict[str, Encoder] = {
    "plain": lambda s, _: s,
    "hex": lambda s, _: s.encode().hex(),
    "HEX": lambda s, _: s.encode().hex().upper(),
    "url": lambda s, _: quote(s, safe=""),
    "url-lowercase": lambda s, _: _lower_escapes(quote(s, safe="")),
    "url-plus": lambda s, _: quote_plus(s),
    "url-twice": lambda s, _: quote(quote(s, safe=""), safe=""),
    "url-twice-lowercase": lambda s, _: _lower_escapes(quote(quote(s, safe=""), safe="")),
    "json": lambda s, _: json.dumps(s)[1:-1],
    "json-every-char": lambda s, _: "".join(_json_escape(c) for c in s),
    "json-some-chars": _json_partly,
    "html-decimal": lambda s, _: "".join(f"&#{ord(c)};" for c in s),
    "html-hex": lambda s, _: "".join(f"&#x{ord(c):x};" for c in s),
    "html-mixed": lambda s, rng: "".join(_entity(c, rng) for c in s),
    "html-escape": lambda s, _: html.escape(s),
    "base64-inside": _base64_inside,
    "bytes-repr": lambda s, _: repr(s.encode()),
    "mojibake": lambda s, _: s.encode().decode("latin-1"),
}


# -- through the harness ---------------------------------------------------------------------


def _harness(home: Path, secret: str) -> Harness:
    broker = SecretBroker(
        [CallableSecretProvider(lambda name: secret)], redactor=Redactor(placeholder=PLACEHOLDER)
    )
    policy = CedarPolicyEngine(
        policies="permit(principal, action, resource);", include_defaults=False
    )
    return Harness(home=home, policy=policy, secrets=broker)


class _CapturedLogs:
    """The root logger's records as an operator's handler writes them: through the
    `RedactingFilter` the README tells a library user to attach."""

    def __init__(self, redactor: Redactor) -> None:
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.addFilter(RedactingFilter(redactor))

    def __enter__(self) -> _CapturedLogs:
        logging.getLogger().addHandler(self.handler)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger().removeHandler(self.handler)

    @property
    def text(self) -> str:
        return self.stream.getvalue()


def _leaks(secret: str, harness: Harness, envelopes: list[ResultEnvelope], logs: str) -> list[str]:
    """Where `secret` can be recovered: the envelopes (as JSON and every string in them),
    the ledger's files, the artifacts, the log lines."""
    harness.flush()
    places = {"logs": logs, "ledger": ledger_text(harness.home)}
    for number, envelope in enumerate(envelopes):
        places[f"envelope {number}"] = envelope.model_dump_json()
        places[f"envelope {number} strings"] = "\n".join(strings_in(envelope.model_dump()))
    for artifact in harness.home.glob("artifacts/**/*"):
        if artifact.is_file():
            places[str(artifact)] = artifact.read_bytes().decode("utf-8", "replace")
    return [place for place, text in places.items() if recoverable(secret, text)]


class Vocabulary(str):
    """Text whose repr is short: hypothesis prints a failing test's arguments."""

    def __repr__(self) -> str:
        return f"<{len(self)} characters of fixed text>"


@pytest.fixture(scope="session")
def vocabulary(tmp_path_factory: pytest.TempPathFactory) -> Vocabulary:
    """What the ledger, the envelopes and the logs of the calls below hold whatever the
    secret: the schema, ids, messages. A secret among these words (hypothesis tries the
    string constants it finds in the code under test, such as "invoca") would be found
    there without having leaked."""
    harness = _harness(tmp_path_factory.mktemp("vocabulary") / "tk", "unrelated-secret")
    log = logging.getLogger("tests.leaky_tool")

    @tool(side_effect="none", credentials=["token"])
    def reveal(context: ToolContext) -> Any:
        """Return nothing."""
        log.warning("calling the API with %s", "nothing")
        log.warning("received %r", b"nothing")
        return {"blob": "nothing"}

    @tool(side_effect="none", credentials=["token"])
    def refuse(context: ToolContext) -> Any:
        """Fail."""
        raise PermissionError("the API refused nothing")

    @tool(side_effect="none", credentials=["token"])
    def refuse_bytes(context: ToolContext) -> Any:
        """Fail."""
        raise ValueError(b"nothing")

    for function in (reveal, refuse, refuse_bytes):
        harness.register(function)
    with _CapturedLogs(harness.redactor) as logs:
        envelopes = [
            harness.invoke_sync(Proposal(f"c{n}", name, {}), principal=ALICE)
            for n, name in enumerate(("reveal", "refuse", "refuse_bytes"))
        ]
    harness.flush()
    texts = [logs.text, ledger_text(harness.home)]
    texts += [e.model_dump_json() for e in envelopes]
    harness.close()
    return Vocabulary("\n".join(texts))


def _nest(value: Any, depth: int) -> Any:
    for level in range(depth):
        value = {f"level{level}": [value]} if level % 2 else [value, level]
    return value


leaky_settings = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@leaky_settings
@given(
    secret=secret_texts,
    encoding=st.sampled_from(sorted(ENCODINGS)),
    before=st.text(max_size=12),
    after=st.text(max_size=12),
    depth=st.integers(0, 3),
    stored_aside=st.booleans(),
    rng=st.randoms(use_true_random=False),
)
def test_an_encoded_secret_reaches_no_envelope_ledger_row_or_log(
    tmp_path_factory: pytest.TempPathFactory,
    vocabulary: Vocabulary,
    secret: str,
    encoding: str,
    before: str,
    after: str,
    depth: int,
    stored_aside: bool,
    rng: random.Random,
) -> None:
    """Defect: hex, double URL-encoding, ``\\u`` escapes, HTML entities and base64 at an
    offset of a tool's credential reached the model and the ledger unredacted. A result
    larger than the artifact threshold is stored aside, and searched there too."""
    assume(secret not in vocabulary)
    after += "." * ARTIFACT_SIZE if stored_aside else ""
    harness = _harness(tmp_path_factory.mktemp("encoded") / "tk", secret)
    log = logging.getLogger("tests.leaky_tool")

    def leaked(context: ToolContext) -> str:
        form = ENCODINGS[encoding](context.secrets["token"], rng)
        log.warning("calling the API with %s", form)
        return before + form + after

    @tool(side_effect="none", credentials=["token"])
    def reveal(context: ToolContext) -> Any:
        """Return the token, encoded."""
        return _nest(leaked(context), depth)

    @tool(side_effect="none", credentials=["token"])
    def refuse(context: ToolContext) -> Any:
        """Fail, quoting the token."""
        raise PermissionError(f"the API refused {leaked(context)}")

    harness.register(reveal)
    harness.register(refuse)
    with _CapturedLogs(harness.redactor) as logs:
        envelopes = [
            harness.invoke_sync(Proposal("c1", "reveal", {}), principal=ALICE),
            harness.invoke_sync(Proposal("c2", "refuse", {}), principal=ALICE),
        ]
    assert bool(envelopes[0].artifact_refs) == stored_aside
    assert _leaks(secret, harness, envelopes, logs.text) == []
    harness.close()


byte_kinds: dict[str, Callable[[bytes], Any]] = {
    "bytes": bytes,
    "bytearray": bytearray,
    "memoryview": memoryview,
}


@leaky_settings
@given(
    secret=secret_texts,
    kind=st.sampled_from(sorted(byte_kinds)),
    before=st.binary(max_size=12) | st.text(max_size=12).map(str.encode),
    after=st.binary(max_size=12) | st.text(max_size=12).map(str.encode),
    depth=st.integers(0, 3),
)
def test_a_secret_in_bytes_reaches_no_envelope_ledger_row_or_log(
    tmp_path_factory: pytest.TempPathFactory,
    vocabulary: Vocabulary,
    secret: str,
    kind: str,
    before: bytes,
    after: bytes,
    depth: int,
) -> None:
    """Defect: a tool's secret as `bytes` reached the model and the ledger whenever the bytes
    were shown rather than decoded — in an exception (``b'tok\\xc3\\xa9n'``), in a log line —
    and `Redactor.redact` returned byte strings untouched."""
    assume(secret not in vocabulary)
    harness = _harness(tmp_path_factory.mktemp("bytes") / "tk", secret)
    log = logging.getLogger("tests.leaky_tool")
    wrap = byte_kinds[kind]

    def blob(context: ToolContext) -> bytes:
        return before + context.secrets["token"].encode() + after

    @tool(side_effect="none", credentials=["token"])
    def reveal(context: ToolContext) -> Any:
        """Return the token as bytes."""
        log.warning("received %r", blob(context))
        return {"blob": _nest(wrap(blob(context)), depth)}

    @tool(side_effect="none", credentials=["token"])
    def refuse(context: ToolContext) -> Any:
        """Fail, quoting the token's bytes."""
        raise ValueError(blob(context))

    harness.register(reveal)
    harness.register(refuse)
    with _CapturedLogs(harness.redactor) as logs:
        envelopes = [
            harness.invoke_sync(Proposal("c1", "reveal", {}), principal=ALICE),
            harness.invoke_sync(Proposal("c2", "refuse", {}), principal=ALICE),
        ]
    assert _leaks(secret, harness, envelopes, logs.text) == []
    scrubbed = harness.redactor.redact({"nested": [wrap(before + secret.encode() + after)]})
    assert not recoverable(secret, repr(scrubbed))
    harness.close()


# -- the redactor alone: short secrets, any alignment, streams ----------------------------


@settings(max_examples=150, deadline=None)
@given(
    secret=st.text(secret_characters, min_size=4, max_size=24),
    encoding=st.sampled_from(sorted(ENCODINGS)),
    before=st.text(max_size=12),
    after=st.text(max_size=12),
    rng=st.randoms(use_true_random=False),
)
def test_every_covered_encoding_is_scrubbed_from_text_and_bytes(
    secret: str, encoding: str, before: str, after: str, rng: random.Random
) -> None:
    """The shortest secrets the redactor accepts (4 characters) included: in text and in
    the same text's UTF-8 bytes."""
    redactor = Redactor(placeholder=PLACEHOLDER)
    redactor.add(secret)
    form = ENCODINGS[encoding](secret, rng)
    assert recoverable(secret, form)  # the oracle sees what it is meant to see
    text = before + form + after
    assert not recoverable(secret, redactor.redact_text(text))
    scrubbed = redactor.redact_bytes(text.encode("utf-8", "surrogatepass"))
    assert not recoverable(secret, scrubbed.decode("utf-8", "replace"))


@settings(max_examples=40, deadline=None)
@given(
    secret=secret_texts,
    encoding=st.sampled_from(sorted(ENCODINGS)),
    noise=st.text(max_size=40),
    cuts=st.lists(st.integers(0, 400), max_size=8),
    rng=st.randoms(use_true_random=False),
)
def test_the_upstream_log_is_scrubbed_however_the_writes_are_cut(
    tmp_path_factory: pytest.TempPathFactory,
    secret: str,
    encoding: str,
    noise: str,
    cuts: list[int],
    rng: random.Random,
) -> None:
    """A stdio upstream's stderr goes through a real pipe into its log file; a secret split
    between two writes is still found."""
    redactor = Redactor(placeholder=PLACEHOLDER)
    redactor.add(secret)
    data = f"{noise}TOKEN={ENCODINGS[encoding](secret, rng)}\n{noise}".encode()
    path = tmp_path_factory.mktemp("upstream") / "up.log"

    async def write() -> None:
        async with upstream_log(path, redactor) as errlog:
            position = 0
            for cut in sorted({min(c, len(data)) for c in cuts} | {len(data)}):
                errlog.buffer.write(data[position:cut])
                errlog.buffer.flush()
                position = cut

    anyio.run(write)
    logged = path.read_bytes()
    assert not recoverable(secret, logged.decode("utf-8", "replace"))
    assert PLACEHOLDER.encode() in logged  # it was written, and scrubbed


# -- end to end: an upstream server echoing the credential the gateway handed it ----------


GATEWAY_CONFIG = """
home = "{home}"
tools = ["chatty_tools"]
stdio_principal = "alice"

[principals.alice]
tenant = "acme"

[mcpServers.leaky]
command = "{python}"
args = ["{server}"]
env = {{ TOKEN = "${{LEAKY_TOKEN}}" }}
namespace = "leaky."

[mcpServers.leaky.tools.fingerprint]
side_effect = "none"
[mcpServers.leaky.tools.reveal]
side_effect = "none"
[mcpServers.leaky.tools.refuse]
side_effect = "none"
[mcpServers.leaky.tools.debug]
side_effect = "none"
"""


def test_an_upstream_echoing_its_credential_leaks_it_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: a credential handed to an upstream through ``env = {TOKEN = "${VAR}"}`` was
    not a registered secret. The upstream echoing it in a result or an error, or printing it
    to stderr, put it in front of the model, in the ledger and in the upstream log file; and
    the gateway's own log lines were not scrubbed at all (a local tool logging its key).

    A real gateway process (``toolkeeper serve``, debug logging) with a real stdio upstream,
    driven by the official SDK client."""
    token = "tk-ünï/" + base64.urlsafe_b64encode(random.randbytes(12)).decode()
    key = "key-é" + base64.urlsafe_b64encode(random.randbytes(12)).decode()
    home = tmp_path / "home"
    config = tmp_path / "toolkeeper.toml"
    server = FIXTURES / "leaky_upstream.py"
    config.write_text(
        GATEWAY_CONFIG.format(home=home, python=sys.executable, server=server),
        encoding="utf-8",
    )
    shutil.copy(FIXTURES / "chatty_tools.py", tmp_path / "chatty_tools.py")
    monkeypatch.setenv("LEAKY_TOKEN", token)
    monkeypatch.setenv("TOOLKEEPER_SECRET_API_KEY", key)
    assert main(["upstreams", "approve", str(config), "leaky", "--all", "--by", "olga"]) == 0

    gateway_log = tmp_path / "gateway.log"
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolkeeper", "serve", str(config), "--log-level", "debug"],
        env=dict(os.environ),
    )
    answers: dict[str, Any] = {}

    async def drive() -> None:
        with gateway_log.open("w", encoding="utf-8") as errlog:
            async with Client(stdio_client(parameters, errlog=errlog)) as client:
                # The gateway serves at once; the upstream's tools join when it connects.
                with anyio.fail_after(30):
                    while "leaky.debug" not in {t.name for t in (await client.list_tools()).tools}:
                        await anyio.sleep(0.1)
                for name in ("fingerprint", "reveal", "refuse", "debug"):
                    result = await client.call_tool(f"leaky.{name}", {})
                    answers[name] = result.model_dump(mode="json", by_alias=True)
                result = await client.call_tool("chatty", {})
                answers["chatty"] = result.model_dump(mode="json", by_alias=True)

    anyio.run(drive)

    # The upstream did receive the token, and did echo it: a hash proves the first, the
    # placeholder where the token was proves the second.
    fingerprint = hashlib.sha256(token.encode()).hexdigest()
    assert fingerprint in json.dumps(answers["fingerprint"])
    assert "[REDACTED]" in json.dumps(answers["reveal"])
    assert answers["refuse"]["isError"] and "[REDACTED]" in json.dumps(answers["refuse"])
    upstream_log_text = (home / "upstreams" / "leaky.log").read_text(encoding="utf-8")
    assert "debug: TOKEN=[REDACTED]" in upstream_log_text
    gateway_log_text = gateway_log.read_text(encoding="utf-8")
    assert "calling the API with key [REDACTED]" in gateway_log_text

    places = {
        "client": json.dumps(answers),
        "ledger": ledger_text(home),
        "upstream log": upstream_log_text,
        "gateway log": gateway_log_text,
    }
    for secret in (token, key):
        assert [place for place, text in places.items() if recoverable(secret, text)] == []
