from __future__ import annotations
from sdk_support import LiveServer

async def test_plain(server: LiveServer) -> None:
    async with server.async_client() as client:
        events = [e async for e in client.stream("steps", "go")]
    assert events[-1].is_result

async def test_early(server: LiveServer) -> None:
    async with server.async_client() as client:
        async with client.stream("slow", "go") as events:
            async for e in events:
                assert e.event == "run"
                break
        assert await client.cancel(e.data["run_id"])
        async with client.stream("steps", "go") as events:
            async for e in events:
                if e.event == "delta":
                    break
        async for e in client.stream("hello", "go"):
            if e.is_result:
                break   # without async with: our own generator is left to GC
