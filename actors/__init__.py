"""Everything that runs on Ray: thin actor shells around hetray core objects, and their groups.

Installed as ``hetray.actors``; import it as ``from hetray.actors.probe import DeviceProbe``.
"""
