"""Redactor and RedactingFilter: secret values and their encodings never survive scrubbing."""

from __future__ import annotations

import base64
import io
import json
import logging
import re
import string
from collections.abc import Callable
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from toolkeeper.errors import ConfigError
from toolkeeper.secrets.redaction import RedactingFilter, Redactor

# Chosen so that all eleven forms below differ: padding, '+' in base64, '/', a space, a quote.
SECRET = 'tok/en ü"?>>>'


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def _b64url(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode()).decode()


ENCODERS: dict[str, Callable[[str], str]] = {
    "raw": lambda v: v,
    "base64": _b64,
    "base64-unpadded": lambda v: _b64(v).rstrip("="),
    "base64url": _b64url,
    "base64url-unpadded": lambda v: _b64url(v).rstrip("="),
    "quote": lambda v: quote(v, safe=""),
    "quote-keep-slash": quote,
    "quote-lowercase-hex": lambda v: re.sub("%..", lambda m: m.group().lower(), quote(v, safe="")),
    "quote_plus": quote_plus,
    "json-ascii": lambda v: json.dumps(v)[1:-1],
    "json-unicode": lambda v: json.dumps(v, ensure_ascii=False)[1:-1],
}


def _redactor(*secrets: str, **options: object) -> Redactor:
    redactor = Redactor(**options)  # type: ignore[arg-type]
    for secret in secrets:
        redactor.add(secret)
    return redactor


@pytest.mark.parametrize("form", sorted(ENCODERS))
def test_each_encoded_form_is_redacted_inside_larger_text(form: str) -> None:
    encoded = ENCODERS[form](SECRET)
    text = f"Authorization: {encoded}; retry later"
    assert _redactor(SECRET).redact_text(text) == "Authorization: [REDACTED]; retry later"


def test_the_encoded_forms_differ_from_each_other() -> None:
    # Guards the parametrized test above against testing one form eleven times.
    assert len({encode(SECRET) for encode in ENCODERS.values()}) == len(ENCODERS)


def test_every_occurrence_is_replaced() -> None:
    text = f"{SECRET} and {_b64(SECRET)} and {SECRET}"
    assert _redactor(SECRET).redact_text(text) == "[REDACTED] and [REDACTED] and [REDACTED]"


def test_json_document_containing_the_secret_is_scrubbed() -> None:
    document = json.dumps({"token": SECRET, "note": "ok"})
    redacted = _redactor(SECRET).redact_text(document)
    assert json.loads(redacted) == {"token": "[REDACTED]", "note": "ok"}


def test_redact_walks_nested_structures_including_keys() -> None:
    secret = "hunter2-hunter2"
    value = {
        secret: "key was secret",
        "list": [1, f"x{secret}y", (f"t {_b64(secret)}", 2.5, None)],
        "set": frozenset({secret}),
        "nested": {"deep": [{"url": f"https://h/?t={quote_plus(secret)}"}]},
        "count": 3,
        "flag": True,
    }
    redacted = _redactor(secret).redact(value)
    assert redacted == {
        "[REDACTED]": "key was secret",
        "list": [1, "x[REDACTED]y", ("t [REDACTED]", 2.5, None)],
        "set": frozenset({"[REDACTED]"}),
        "nested": {"deep": [{"url": "https://h/?t=[REDACTED]"}]},
        "count": 3,
        "flag": True,
    }
    assert value[secret] == "key was secret"  # the input is not modified


def test_redact_returns_a_new_structure() -> None:
    value = {"a": ["plain"]}
    redacted = _redactor("unrelated-secret").redact(value)
    assert redacted == value
    assert redacted is not value
    assert redacted["a"] is not value["a"]


def test_other_objects_are_returned_untouched() -> None:
    marker = object()
    assert _redactor("some-secret").redact(marker) is marker


def test_byte_strings_are_scrubbed_as_bytes() -> None:
    redactor = _redactor("some-secret")
    assert redactor.redact(b"<some-secret>") == b"<[REDACTED]>"
    assert redactor.redact([bytearray(b"some-secret"), memoryview(b"x")]) == [b"[REDACTED]", b"x"]


def test_without_secrets_the_input_itself_is_returned() -> None:
    value = {"a": ["b", ("c",)]}
    text = "nothing to see"
    redactor = Redactor()
    assert redactor.redact(value) is value
    assert redactor.redact_text(text) is text


def test_text_without_a_match_is_returned_as_is() -> None:
    text = "nothing to see here"
    assert _redactor("some-secret").redact_text(text) is text


def test_overlapping_secrets_leave_no_fragment_of_either() -> None:
    first, second = "abcdXYZ1", "XYZ12345"
    redactor = _redactor(first, second)
    assert redactor.redact_text("<abcdXYZ12345>") == "<[REDACTED]>"
    assert redactor.redact_text("<XYZ12345>") == "<[REDACTED]>"


def test_longest_secret_wins_over_one_it_contains() -> None:
    redactor = _redactor("secret12", "my-secret1234")
    assert redactor.redact_text("a my-secret1234 b secret12 c") == "a [REDACTED] b [REDACTED] c"


def test_adding_after_use_rebuilds_the_pattern() -> None:
    redactor = _redactor("first-secret")
    assert redactor.redact_text("first-secret second-secret") == "[REDACTED] second-secret"
    redactor.add("second-secret")
    assert redactor.redact_text("first-secret second-secret") == "[REDACTED] [REDACTED]"


def test_placeholder_is_configurable() -> None:
    assert _redactor("token-value", placeholder="***").redact_text("t=token-value") == "t=***"


def test_short_values_are_refused_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    redactor = Redactor(min_length=4)
    with caplog.at_level(logging.WARNING, logger="toolkeeper.secrets.redaction"):
        redactor.add("abc")
    assert len(redactor) == 0
    assert "abc" not in redactor
    assert redactor.redact_text("abc abcdef") == "abc abcdef"
    assert "3-character secret" in caplog.text
    assert "abc" not in caplog.text


def test_min_length_below_one_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        Redactor(min_length=0)
    assert info.value.key == "min_length"
    assert info.value.value == 0


def test_len_and_contains_count_registered_values() -> None:
    redactor = _redactor("first-secret", "second-secret", "first-secret")
    assert len(redactor) == 2
    assert "first-secret" in redactor
    assert _b64("first-secret") not in redactor  # forms are not counted as secrets
    assert 42 not in redactor


def test_repr_hides_values() -> None:
    redactor = _redactor("first-secret")
    assert "first-secret" not in repr(redactor)
    assert "1 hidden" in repr(redactor)


# -- RedactingFilter with a real logger ---------------------------------------------------


@pytest.fixture
def scrubbed_logger(request: pytest.FixtureRequest) -> tuple[logging.Logger, io.StringIO, Redactor]:
    redactor = Redactor()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.addFilter(RedactingFilter(redactor))
    log = logging.getLogger(f"toolkeeper.test.{request.node.name}")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    request.addfinalizer(lambda: log.removeHandler(handler))
    return log, stream, redactor


class _Leaky:
    def __str__(self) -> str:
        return f"<client token={SECRET}>"


def test_filter_scrubs_message_and_args(
    scrubbed_logger: tuple[logging.Logger, io.StringIO, Redactor],
) -> None:
    log, stream, redactor = scrubbed_logger
    redactor.add(SECRET)
    log.info(f"inline {SECRET}")
    log.info("arg %s and %s", SECRET, _b64(SECRET))
    log.info("mapping %(token)s", {"token": SECRET})
    log.info("object %s", _Leaky())
    output = stream.getvalue()
    assert SECRET not in output
    assert _b64(SECRET) not in output
    assert output.splitlines() == [
        "INFO inline [REDACTED]",
        "INFO arg [REDACTED] and [REDACTED]",
        "INFO mapping [REDACTED]",
        "INFO object <client token=[REDACTED]>",
    ]


def test_filter_scrubs_exception_text(
    scrubbed_logger: tuple[logging.Logger, io.StringIO, Redactor],
) -> None:
    log, stream, redactor = scrubbed_logger
    redactor.add(SECRET)
    try:
        raise ValueError(f"upstream rejected {SECRET}")
    except ValueError:
        log.exception("call failed")
    output = stream.getvalue()
    assert SECRET not in output
    assert "Traceback (most recent call last)" in output
    assert "ValueError: upstream rejected [REDACTED]" in output


def test_filter_scrubs_stack_info(
    scrubbed_logger: tuple[logging.Logger, io.StringIO, Redactor],
) -> None:
    log, stream, redactor = scrubbed_logger
    redactor.add("test_filter_scrubs_stack_info")  # the function name shows in the stack
    log.info("where am I", stack_info=True)
    assert "Stack (most recent call last)" in stream.getvalue()
    assert "test_filter_scrubs_stack_info" not in stream.getvalue()


def test_filter_scrubs_a_malformed_call_instead_of_failing(
    scrubbed_logger: tuple[logging.Logger, io.StringIO, Redactor],
) -> None:
    log, stream, redactor = scrubbed_logger
    redactor.add(SECRET)
    log.info("two placeholders %s %s", SECRET)
    assert SECRET not in stream.getvalue()
    assert "[REDACTED]" in stream.getvalue()


def test_filter_without_secrets_leaves_the_record_alone() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "a %s", ("b",), None)
    assert RedactingFilter(Redactor()).filter(record) is True
    assert record.args == ("b",)


# -- properties ---------------------------------------------------------------------------

SECRET_ALPHABET = string.printable + "éü€😀"
# A placeholder that no encoded form can contain, so "no form survives" cannot be defeated
# by a form that is assembled from the placeholder and the text next to it.
PLACEHOLDER = "■"
secrets = st.text(alphabet=SECRET_ALPHABET, min_size=8, max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(secrets, min_size=1, max_size=3, unique=True),
    fillers=st.lists(st.text(max_size=30), min_size=len(ENCODERS) * 3 + 1),
)
def test_no_encoded_form_survives(values: list[str], fillers: list[str]) -> None:
    forms = [encode(value) for value in values for encode in ENCODERS.values()]
    between = zip(forms, fillers[1 : len(forms) + 1], strict=True)
    text = fillers[0] + "".join(form + filler for form, filler in between)
    redacted = _redactor(*values, placeholder=PLACEHOLDER).redact_text(text)
    assert [form for form in forms if form in redacted] == []


@settings(max_examples=200, deadline=None)
@given(values=st.lists(secrets, min_size=1, max_size=3), text=st.text(max_size=200))
def test_text_without_secrets_is_unchanged(values: list[str], text: str) -> None:
    assume(not any(encode(v) in text for v in values for encode in ENCODERS.values()))
    assert _redactor(*values).redact_text(text) == text
