"""The a2a-sdk's own "helloworld" sample agent (a2aproject/a2a-samples,
samples/python/agents/helloworld), served on 127.0.0.1 by a port of the system's choosing,
printed on the first line of standard output.

Written as the sample is, with the SDK's server (its request handler, task store and Starlette
routes); served by hypercorn's asyncio worker instead of uvicorn, which Soulacy does not
depend on. Run as ``python sdk_sample_server.py [0.3]``; it serves until it is terminated. With
``0.3``, its card offers A2A 0.3 only, and its routes speak it (the SDK's ``enable_v0_3_compat``).
"""

from __future__ import annotations

import asyncio
import socket
import sys

from a2a.helpers import (
    get_message_text,
    new_task_from_user_message,
    new_text_message,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    TaskState,
)
from hypercorn.asyncio import serve
from hypercorn.config import Config
from starlette.applications import Starlette


class HelloWorldAgentExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue=event_queue, task_id=task.id, context_id=task.context_id)
        await updater.update_status(
            state=TaskState.TASK_STATE_WORKING, message=new_text_message("Processing request...")
        )
        query = get_message_text(context.message)
        result = f"Hello, World! I have received your request ({query})"
        await updater.add_artifact(parts=[new_text_part(text=result, media_type="text/plain")])
        await updater.update_status(
            state=TaskState.TASK_STATE_COMPLETED, message=new_text_message("Request is completed!")
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("Cancel is not supported.")


def app(url: str, version: str | None) -> Starlette:
    skill = AgentSkill(
        id="echo_bot",
        name="Echo Bot",
        description="An example agent that acknowledges client request.",
        input_modes=["text/plain"],
        output_modes=["text/plain"],
        tags=["a2a", "echo-example"],
    )
    card = AgentCard(
        name="Hello World Agent",
        description="Just a hello world agent",
        version="0.0.1",
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        capabilities=AgentCapabilities(streaming=True),
        # The sample names no version (the SDK reads it as 1.0).
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", url=url, protocol_version=version or "")
        ],
        skills=[skill],
    )
    handler = DefaultRequestHandler(
        agent_executor=HelloWorldAgentExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    rpc = create_jsonrpc_routes(handler, "/", enable_v0_3_compat=version == "0.3")
    return Starlette(routes=[*create_agent_card_routes(card), *rpc])


def main() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config = Config()
    config.bind = [f"fd://{listener.fileno()}"]
    config.accesslog = None
    print(port, flush=True)
    version = sys.argv[1] if len(sys.argv) > 1 else None
    asyncio.run(serve(app(f"http://127.0.0.1:{port}", version), config))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
