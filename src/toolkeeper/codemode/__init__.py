"""Code Mode: the catalog as a typed Python SDK, one `run_code` tool, and programs that run
in a sandbox where every call they make is a governed call (docs/code-mode.md)."""

from toolkeeper.codemode.program import CodeLimits, HostCall, InnerCallError, ProgramOutcome

__all__ = ["CodeLimits", "HostCall", "InnerCallError", "ProgramOutcome"]
