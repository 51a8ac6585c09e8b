"""Where people see the event stream: the %%chat magics, the inspector widget and its static copy, the CLI,
and the protocol encodings (Chat Completions chunks, delta-encoding v1 patches, SSE).
"""
