"""perfgate: a pytest-based performance regression suite for SGLang serving."""

__version__ = "0.1.0"
