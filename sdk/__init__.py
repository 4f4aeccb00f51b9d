"""The Python client of Soulacy's HTTP/SSE API (httpx only).

Not built yet: it arrives with the HTTP/SSE transport (step 08). The package exists so that the
layout and the wheel are complete from the start.
"""
