"""Contracts from the tool formats in the wild (MCP, OpenAI, Anthropic, BFCL) and catalogs
loaded from files, folders and Python modules."""

from toolkeeper.importers.catalog import Catalog, CatalogProblem, load_catalog
from toolkeeper.importers.formats import load_tool_list

__all__ = ["Catalog", "CatalogProblem", "load_catalog", "load_tool_list"]
