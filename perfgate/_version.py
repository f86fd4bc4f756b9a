"""perfgate's version: its own module, so that reading it imports nothing else of the package."""

__version__ = "0.1.0"
