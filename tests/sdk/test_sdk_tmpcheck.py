from __future__ import annotations
from sdk_support import LiveServer

async def test_a(server: LiveServer) -> None:
    async with server.async_client() as client:
        async with client.stream("slow", "go") as events:
            async for e in events:
                assert e.event == "run"
                break
        assert await client.cancel(e.data["run_id"])

async def test_b(server: LiveServer) -> None:
    async with server.async_client() as client:
        async with client.stream("steps", "go") as events:
            async for e in events:
                if e.event == "delta":
                    break

async def test_c(server: LiveServer) -> None:
    async with server.async_client() as client:
        async for e in client.stream("hello", "go"):
            if e.is_result:
                break
