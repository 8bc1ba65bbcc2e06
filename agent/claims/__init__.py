"""The claim check: every cited sentence of the report held to the source it cites.

Owns the anchor (the source's sentence(s) that best support a claim, found lexically in the
source's own language: anchors.py, text.py), the rules that call a claim "not supported" without a
model (rules.py), the small model's judgement of the rest (judge.py, its prompt in
agent/prompts/claim_check.md), the pipeline both share (check.py) and what readers and exporters see
of it (view.py). Knows nothing of tools or the loop: write_section and revise_section call it through
agent/tools/claim_check.py, which keeps what the agent was already told; `python -m bench.claims`
measures it. Imports nothing heavy at start-up: bm25s is loaded by the first check."""
