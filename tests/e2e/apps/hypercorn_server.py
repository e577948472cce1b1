"""Serves asgi_app with hypercorn on the loop named on the command line.

`hypercorn --worker-class asyncio` makes its own loop (asyncio.Runner with
no loop factory) and takes no factory, so this launcher calls
`hypercorn.asyncio.serve` inside `zloopgo.run` (or `asyncio.run` for stock
asyncio): serve runs on the running loop, and with no shutdown trigger it
installs its own SIGINT/SIGTERM handlers on that loop for a graceful stop.

usage: python hypercorn_server.py {asyncio,zloopgo} PORT"""

import asyncio
import sys

from asgi_app import app
from hypercorn.asyncio import serve
from hypercorn.config import Config

import zloopgo


def main() -> None:
    loop_name, port = sys.argv[1], int(sys.argv[2])
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.errorlog = "-"
    config.graceful_timeout = 5
    run = {"asyncio": asyncio.run, "zloopgo": zloopgo.run}[loop_name]
    run(serve(app, config))


if __name__ == "__main__":
    main()
