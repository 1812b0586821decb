"""What the example agents on other frameworks share (the OpenAI Agents SDK, Pydantic AI and
LangGraph examples beside this folder): a leased runs table and the hardened variants'
tables (store.py, agent.sql), the world's tools and reply sink over HTTP (world.py), the
tool journal (journal.py), the keyed reply (reply.py), the run report (report.py) and the
worker's commands and loop (worker.py). An example's entry module puts this folder's parent
on sys.path before it imports `agent_kit`.
"""
