"""A real `toolkeeper serve --http` process over the test configuration, one per session:
starting Python with the MCP stack costs seconds, and every HTTP test can share it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gateway_support import Gateway, running_gateway, write_gateway


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def gateway_files(tmp_path_factory: pytest.TempPathFactory) -> Gateway:
    return write_gateway(tmp_path_factory.mktemp("gateway"))


@pytest.fixture(scope="session")
def http_gateway(gateway_files: Gateway) -> Iterator[Gateway]:
    with running_gateway(gateway_files) as gateway:
        yield gateway
