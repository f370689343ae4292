"""``python -m hetray.cli``."""

from hetray.cli.main import main

main()
