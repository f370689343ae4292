"""Core values shared by every hetray module: errors, units and constants."""
