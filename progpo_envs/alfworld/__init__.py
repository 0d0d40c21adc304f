"""See the env module."""
