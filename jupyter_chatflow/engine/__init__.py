"""The model as a generator: `Model` (prefill, decode, attention replay), sampling, constrained decoding,
the prompt cache, and `load_model`.
"""
