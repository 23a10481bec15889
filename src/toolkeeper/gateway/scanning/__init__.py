"""Scanning upstream tool definitions for injection: the text a model would read, the checks
over it, and the findings a reviewer judges."""
