"""Defaults shared by every entry point (CLI, magics, `Chat.send`); no imports, so the CLI can read them cheaply."""

# What a chat turn samples with unless told otherwise: SmolLM2's model card (temperature 0.2, top-p 0.9) plus a
# mild repetition penalty. Without the penalty the 135M model looped until max_tokens on 5 of 12 seeds for "What is
# the capital of France?" (0 of 12 with it); greedy answers to three test prompts kept their meaning.
CHAT_DEFAULTS = {"temperature": 0.2, "top_p": 0.9, "repetition_penalty": 1.1}
