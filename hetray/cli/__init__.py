"""The ``hetray`` command line (may import Ray and hetray.actors)."""
