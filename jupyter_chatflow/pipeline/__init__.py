"""One turn of "press Send": the request, safety layers, memory recall, context assembly, generation with
tools, streaming, the title; `Chat` runs it and `Response` replays its events.
"""
