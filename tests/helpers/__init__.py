"""Helpers shared by test modules (a test module never imports another): `from tests.helpers.x import y`.

- sources: a local number source the scripted engine answers
- tiny_llama: a tiny random Llama on disk and token sequences for critics and hidden states
- engines: the scripted engine recording its requests
- real_data: the dataset excerpts and, where present, the full files
- plugin_env: the example plugin installed into a throwaway venv
"""
