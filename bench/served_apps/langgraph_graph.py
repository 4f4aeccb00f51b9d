"""The graph that ``langgraph dev`` serves for bench/served.py: bench/peers' hand-written graph.

The two-node ``StateGraph`` of ``bench/peers/langgraph_graph_w.py`` (plain async functions, dict
messages) scripted for one chat: the model node calls the tool ``step(i=1)``, the tool node
answers ``ok-1``, the model node answers ``done``. No checkpointer is passed: the server gives
the graph its own (the in-memory runtime's). Loaded by path from the ``langgraph.json`` that
bench/served.py writes; runs in the peers' venv.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "peers"))

import langgraph_graph_w

graph = langgraph_graph_w.make_graph(2)
