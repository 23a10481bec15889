"""From a `GatewayConfig` to a `Harness` with its local tools registered.

A ``tools`` entry is a module path (``package.module`` or ``package.module:attribute``);
`load_catalog` reads the contracts, and each ``@toolkeeper.tool`` function
found there is registered with the function itself as executor. A contract that names a
verifier or a resource-version reader (``verifier = "manuscript_read_back"``) finds it by
that name in the function's module, so a tool module is self-contained.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from typing import Any

from toolkeeper.contract.model import ToolContract
from toolkeeper.contract.naming import vendor_names
from toolkeeper.errors import ConfigError, ToolkeeperError
from toolkeeper.gateway.config.settings import GatewayConfig
from toolkeeper.gateway.results import RESUME_TOOL
from toolkeeper.importers.catalog import load_catalog
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

_PATH_PART = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


def build_harness(config: GatewayConfig, *, recover: bool = True) -> Harness:
    """The harness the configuration describes: ledger in `home`, policies, local tools.
    `recover=False` leaves recovery to the caller's reconciliation pass, which reports it."""
    policy = CedarPolicyEngine(policy_files=[config.resolve(p) for p in config.policies])
    dsn = config.ledger_dsn()
    ledger = None
    if dsn is not None:
        from toolkeeper.ledger.postgres import PostgresLedger

        ledger = PostgresLedger(dsn)
    harness = Harness(
        home=config.home,
        policy=policy,
        ledger=ledger,
        recover=recover,
        foreign_intent_after=config.ledger.foreign_intent_after,
        argument_threshold=config.ledger.argument_threshold,
        call_timeout=config.call_timeout,
        limits=config.limits.harness_limits(),
        code_tiers=config.code_tiers,
        code_spare=config.code_spare,
    )
    try:
        load_tools(harness, config)
        if config.shell is not None:
            load_shell(harness, config)
        if config.code_mode:
            harness.code_mode()  # registers run_code beside the configured tools
    except BaseException:
        harness.close()
        raise
    return harness


def load_tools(harness: Harness, config: GatewayConfig) -> None:
    """Register every ``@toolkeeper.tool`` function of the configured modules."""
    base = str(config.base_dir)
    if base not in sys.path:
        # Tool modules beside the configuration file import as top-level modules.
        sys.path.insert(0, base)
    for index, target in enumerate(config.tools):
        key = f"tools[{index}]"
        try:
            catalog = load_catalog(target)
        except ToolkeeperError as exc:
            raise ConfigError(f"{key} = {target!r}: {exc}", key=key, value=target) from exc
        if catalog.problems:
            problems = "; ".join(problem.message for problem in catalog.problems)
            raise ConfigError(f"{key} = {target!r}: {problems}", key=key, value=target)
        for contract in catalog.contracts:
            function = _function(catalog.sources[contract.ref])
            if not callable(function) or isinstance(function, ToolContract):
                raise ConfigError(
                    f"{key} = {target!r}: {contract.ref} is a contract with no function to run "
                    "it; define it with @toolkeeper.tool on the function instead",
                    key=key,
                    value=target,
                )
            _register(harness, function, contract, key, target)
    check_reserved_names(harness)


def load_shell(harness: Harness, config: GatewayConfig) -> None:
    """Register the `shell` tool the ``shell`` section describes."""
    shell = config.shell
    assert shell is not None
    from toolkeeper.shell.policy import ShellPolicy
    from toolkeeper.shell.rules import RuleTable

    harness.register_shell(
        roots=list(shell.roots),
        timeout=shell.timeout,
        network=shell.network,
        environment=shell.environment,
        hidden=shell.hidden,
        policy=ShellPolicy(policy_files=shell.policies),
        rules=RuleTable.load(shell.rules) if shell.rules else None,
        unsandboxed_fallback=shell.unsandboxed_fallback,
    )
    check_reserved_names(harness)


def _function(source: str) -> Any:
    """The object a catalog source names: ``module:attr.path[index]``."""
    module_name, _, path = source.partition(":")
    value: Any = importlib.import_module(module_name)
    for index, name in _PATH_PART.findall(path):
        value = value[int(index)] if index else getattr(value, name)
    return value


def _register(
    harness: Harness, function: Callable[..., Any], contract: ToolContract, key: str, target: str
) -> None:
    module = sys.modules[function.__module__]

    def hook(name: str | None, kind: str) -> Any:
        if name is None:
            return None
        found = getattr(module, name, None)
        if not callable(found):
            raise ConfigError(
                f"{key} = {target!r}: {contract.ref} names {kind} {name!r}, which module "
                f"{module.__name__} does not define; add `def {name}(arguments, context)` there",
                key=key,
                value=target,
            )
        return found

    verifier = hook(contract.verifier, "verifier")
    if verifier is not None:
        harness.register_verifier(contract.verifier, verifier)  # type: ignore[arg-type]
    reader = hook(contract.resource_version, "resource_version reader")
    try:
        harness.register(function, resource_version=reader)
    except ToolkeeperError as exc:
        raise ConfigError(f"{key} = {target!r}: {exc}", key=key, value=target) from exc


def check_reserved_names(harness: Harness) -> None:
    """Refuse a registered tool that MCP clients would see under the gateway's own name."""
    names = vendor_names(harness.registry.latest_contracts(), "mcp")
    for ref, name in names.items():
        if name == RESUME_TOOL:
            raise ConfigError(
                f"{ref} is served to MCP clients as {RESUME_TOOL!r}, the name of the gateway's "
                "own tool; give it another id or an mcp model view name",
                key="tools",
                value=ref,
            )
