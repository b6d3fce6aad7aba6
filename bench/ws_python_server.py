#!/usr/bin/python3
"""The python3-websockets reference servers of bench/websocket.py (issue 20).

    /usr/bin/python3 bench/ws_python_server.py --mode echo|chat [--listen 127.0.0.1:0]

echo: every message is sent back to its sender. chat: every message is sent to every open
connection, the sender's included (websockets.broadcast, which skips a connection whose buffer
is full rather than wait for it). Debian's python3-websockets (10.4) on asyncio's default loop,
as a user of that package would run it: no compression offered by our client, so none is used;
keep-alive pings off, since a benchmark run is no idle connection and the other servers send
none. Prints "[python-websockets] listening on HOST:PORT" on stderr once it accepts, the line
bench/websocket.py waits for.
"""

import argparse
import asyncio
import sys

import websockets


async def echo(ws, path=None):  # websockets 10 passes the path, later versions do not
    try:
        async for message in ws:
            await ws.send(message)
    except websockets.ConnectionClosed:
        pass  # a benchmark client closes without a close handshake: not an error to log


CONNECTIONS = set()


async def chat(ws, path=None):
    CONNECTIONS.add(ws)
    try:
        async for message in ws:
            websockets.broadcast(CONNECTIONS, message)
    except websockets.ConnectionClosed:
        pass
    finally:
        CONNECTIONS.discard(ws)


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("echo", "chat"), default="echo")
    parser.add_argument("--listen", default="127.0.0.1:0")
    opts = parser.parse_args()
    host, port = opts.listen.rsplit(":", 1)
    handler = echo if opts.mode == "echo" else chat
    # backlog: 10,000 clients connect 100 at a time; asyncio's default of 100 drops SYNs.
    async with websockets.serve(handler, host, int(port), ping_interval=None, compression=None,
                                backlog=4096) as server:
        bound = server.sockets[0].getsockname()
        print(f"[python-websockets] listening on {bound[0]}:{bound[1]}", file=sys.stderr,
              flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
