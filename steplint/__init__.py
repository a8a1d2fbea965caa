"""steplint: find and fix training loops that count steps in a unit they did not mean."""

__version__ = "0.1.0"
