"""Argument validation: reading the argument text a model sent, checking it against the
input schema, and turning every violation into a field error, a fix and a repair."""

from toolkeeper.validation.arguments import ValidationResult, validate_arguments
from toolkeeper.validation.repairs import Repair, apply_repairs

__all__ = ["Repair", "ValidationResult", "apply_repairs", "validate_arguments"]
