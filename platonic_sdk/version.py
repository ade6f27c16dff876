"""The SDK's version (recorded in every file and checkpoint marker it writes)."""

__version__ = "0.2.0"
