"""Operating a running membridge: Prometheus metrics, /healthz and /readyz, the usage book, metering, doctor.

Counters and limits that the agent, the LLM client and the tools report to, and the checks an operator runs.
May import config, llm, logs, offload and memory's public face; doctor alone reaches wiring/ (it builds a Services).
"""
