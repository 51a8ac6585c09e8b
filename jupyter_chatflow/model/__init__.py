"""The network itself: the GGUF file and its metadata, the weights (dequantized with gguf's own code), the
decoder transformer (the Llama, Qwen, Gemma and Phi families) in Flax, its compiled XLA programs, and where the
model file is found.
"""
