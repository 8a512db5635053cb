"""One process, built and run: Services (app), the running bot (runtime), the flush worker, the nightly timer, stopping.

The rooms above it (cli/, cluster/, console/) and doctor start from here; other modules name it only in type hints.
May import the rest of bridge's top level (agent, llm, tools, media/, metrics, ...), channels and memory's public face.
"""
