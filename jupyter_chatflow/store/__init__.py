"""What outlives a kernel: one SQLite database with the sessions and their turns, the memories (FTS5 recall)
and the request log.
"""
