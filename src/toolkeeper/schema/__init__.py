"""JSON Schema as catalogs really write it: dialects normalized to 2020-12, foreign type
names, the notes a rewrite leaves, and values that satisfy a schema."""

from toolkeeper.schema.dialects import normalize_schema

__all__ = ["normalize_schema"]
