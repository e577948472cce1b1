"""What the application rows are: each server's rows, the path each asks
for, what every answer must be (the load generator's -check) and how many
connections drive it. Shared by apps/bench.py and apps/report.py; it knows
no process and no sample.
"""

# (row, path, -check)
HTTP_ROWS = (
    ("JSON serialization", "/json", "json"),
    ("single query", "/db", "world"),
    ("20 queries", "/queries?queries=20", "worlds:20"),
    ("fortunes", "/fortunes", "fortunes"),
    ("20 updates", "/updates?queries=20", "worlds:20"),
    ("cached query (Redis, 20 Worlds)", "/cached?count=20", "worlds:20"),
)
WS_ROW = ("WebSocket echo, 1 KiB", "/ws", "echo:1024")
SERVER_ROWS = {"uvicorn": HTTP_ROWS, "aiohttp": HTTP_ROWS, "uvicorn-ws": (WS_ROW,)}
CONNS = {"uvicorn": 32, "aiohttp": 32, "uvicorn-ws": 100}
