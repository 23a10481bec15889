"""The gateway's configuration file: its settings and the errors that name what to fix."""
