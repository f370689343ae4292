"""Communication helpers shared by the training pipelines (no Ray)."""

from hetray.comm.link_emulation import LinkEmulator, LinkStats, ten_gbit_link

__all__ = ["LinkEmulator", "LinkStats", "ten_gbit_link"]
