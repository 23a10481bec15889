"""Configuration errors a reader can act on: every problem on one line as ``key = value: what
is wrong; fix: what to write instead``, keys as dotted paths (``principals.editor.token``),
values shown only when they are scalars that cannot be a token.

pydantic's messages say what is wrong; this adds where (in the reader's own spelling) and how
to fix it (the closest known key for a misspelling, the kind of value a type needs).
"""

from __future__ import annotations

import difflib
import json
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from toolkeeper.errors import ConfigError

_HIDDEN = "<hidden>"
_SECRET_KEYS = ("token",)


def config_error(
    path: Path, exc: ValidationError, model: type[BaseModel], *, servers_key: str = "upstreams"
) -> ConfigError:
    """One `ConfigError` listing every problem of `model` as ``key = value: what is wrong;
    fix: ...``.

    `servers_key` is the name the file used for its upstream servers, so messages name the
    key the reader wrote."""
    errors = exc.errors()
    keys = [_key(error["loc"], servers_key) for error in errors]
    lines = [
        f"  - {key}{_shown(key, error)}: {_message(error)}{_fix(error, model)}"
        for key, error in zip(keys, errors, strict=True)
    ]
    shown = _shown(keys[0], errors[0])
    value = (_HIDDEN if _is_secret(keys[0]) else errors[0].get("input")) if shown else None
    head = f"{path}: {len(lines)} invalid setting{'s' if len(lines) > 1 else ''}:\n"
    return ConfigError(head + "\n".join(lines), key=keys[0], value=value)


def _key(loc: tuple[int | str, ...], servers_key: str) -> str:
    key = _dotted(loc)
    return servers_key + key.removeprefix("upstreams") if key.startswith("upstreams") else key


def _dotted(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for part in loc:
        parts.append(f"[{part}]" if isinstance(part, int) else ("." if parts else "") + part)
    return "".join(parts) or "(top level)"


def _is_secret(key: str) -> bool:
    return key.rsplit(".", 1)[-1] in _SECRET_KEYS


def _shown(key: str, error: Any) -> str:
    """` = value` for a scalar; nothing for a table (it may hold a token) or an unknown key
    (a misspelt ``token`` would otherwise be printed)."""
    value = error.get("input")
    if error["type"] in ("missing", "extra_forbidden") or isinstance(value, dict | list):
        return ""
    if _is_secret(key):
        return f" = {_HIDDEN}"
    text = json.dumps(value, default=str, ensure_ascii=False)
    return f" = {text[:77] + '...' if len(text) > 80 else text}"


def _message(error: Any) -> str:
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


_TYPE_FIXES = {
    "string_type": "write a string in quotes",
    "int_type": "write a whole number",
    "int_parsing": "write a whole number",
    "bool_type": "write true or false",
    "bool_parsing": "write true or false",
    "list_type": 'write a list, e.g. ["a", "b"]',
    "dict_type": "write a table of keys",
    "model_type": "write a table of keys",
    "url_parsing": "write a full URL, e.g. https://auth.example.com",
    "url_scheme": "write an http:// or https:// URL",
    "literal_error": "write one of the values listed",
    "less_than_equal": "lower the value to the bound",
    "greater_than_equal": "raise the value to the bound",
}


def _fix(error: Any, model: type[BaseModel]) -> str:
    """``; fix: ...`` for pydantic's own errors; our validators' messages end with the fix."""
    kind = error["type"]
    loc = error["loc"]
    if kind == "value_error":
        return ""
    if kind == "extra_forbidden":
        known = _known_keys(model, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        if close:
            return f"; fix: did you mean {close[0]!r}? rename {str(loc[-1])!r} to {close[0]!r}"
        return "; fix: remove it; the keys allowed here are " + (", ".join(known) or "none")
    if kind == "missing":
        return f"; fix: add {_dotted(loc)}"
    return "; fix: " + _TYPE_FIXES.get(kind, "correct the value as the message says")


def _known_keys(root: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys the model at `loc` under `root` accepts."""
    model: Any = root
    for part in loc:
        model = _unwrap(model)
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = model.model_fields.get(str(part))
            model = field.annotation if field is not None else None
        elif get_origin(model) in (dict, list):
            model = get_args(model)[-1]
        else:
            return []
    model = _unwrap(model)
    if isinstance(model, type) and issubclass(model, BaseModel):
        hidden = {"base_dir"}
        return [name for name in model.model_fields if name not in hidden]
    return []


def _unwrap(annotation: Any) -> Any:
    """`X | None` → `X`."""
    if get_origin(annotation) in (Union, types.UnionType):
        options = [arg for arg in get_args(annotation) if arg is not type(None)]
        return options[0] if len(options) == 1 else annotation
    return annotation
