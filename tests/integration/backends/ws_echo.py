"""A WebSocket echo server on python3-websockets (Debian's package): an independent RFC 6455
implementation behind the proxy. Prints "listening on 127.0.0.1:PORT" once ready.

Usage: ws_echo.py PORT (0: any free port)
"""

import asyncio
import sys

import websockets


async def echo(ws, path=None):  # websockets 10 passes the path; newer versions do not
    async for message in ws:
        await ws.send(message)


async def main(port):
    async with websockets.serve(echo, "127.0.0.1", port, max_size=None) as server:
        bound = server.sockets[0].getsockname()[1]
        print(f"listening on 127.0.0.1:{bound}", flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
