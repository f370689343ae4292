"""Communication helpers shared by the training pipelines (no Ray)."""

from hetray.comm.link_emulation import LinkEmulator, LinkStats

__all__ = ["LinkEmulator", "LinkStats"]
