"""The model as a generator: `Model` (batch-1 generation, attention replay) on a `Runner` (the compiled programs,
the weights, the prompt cache and the per-sequence primitives), the `Scheduler` that batches sequences (a pure
`plan` and a thin loop), sampling, constrained decoding, and `load_model`.
"""
