"""Weights kept quantized on the device: `layout` (which GGUF formats stay packed, and their bytes; no JAX),
`formats` (a format's block fields, decoded at load, and their dequantizers in the program), `packed` (a matrix's
fields on the host, arranged by rows; int8 quantization), `matrix` (the model's module that dequantizes next to its
dot)."""
