"""Models hetray trains with pipeline parallelism, written so they split into stage chunks.

:mod:`hetray.models.gpt_config` holds the GPT shapes and presets (no torch);
:mod:`hetray.models.gpt` builds the torch model and its chunks. Importing this package loads
neither.
"""
