"""An MCP server for seed-mcp's tests, on the official Python SDK (`mcp`, pinned in
scripts/mcp-servers.sh): the cases the reference servers lack.

Tools (annotations as each is classed):
- count(delay_ms): waits, appends a line to the file in $SEED_MCP_COUNT_FILE, answers
  "counted N" (N lines now). Not safe to repeat: not read-only, not idempotent.
- read_count(delay_ms): waits, answers the file's line count. Read-only.
- count_keyed(key): appends the key as a line to the counter file, answers "counted KEY". Not
  safe to repeat.

Each of the three appends its name to COUNT_FILE.started when it starts (before its wait), so
that a test knows a call is in flight and how many times a tool ran; and the server appends its
process id to COUNT_FILE.pids when it starts, so that a test can wait for one orphaned by a
killed client to be gone.
- find_count(call_id, arguments): the reconciler of count_keyed: "counted KEY" when the file
  holds arguments.key, else an isError result. Read-only.
- fail(message): an isError result carrying the message. Read-only.
- hang(): never answers; its start and its cancellation (notifications/cancelled) are
  counted. Idempotent.
- hangs(at_least): the hang calls started so far, once there are at least `at_least` (it
  waits on an event for them, up to 10 s). Read-only.
- cancellations(at_least): the same for the hang calls cancelled.
- exit_now(): the process exits in the middle of the call, without answering.
- garbage(): writes a line that is not JSON to stdout, then answers "after garbage".
- add_tool(): adds a tool `added` and sends notifications/tools/list_changed.

Run with no arguments for stdio; `--http` serves streamable HTTP on 127.0.0.1 at a free port
and prints `listening on PORT` once the socket listens.
"""

import os
import socket
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer(name="seed-test-server", version="1.0.0")

NOT_SAFE = ToolAnnotations(readOnlyHint=False, idempotentHint=False, destructiveHint=False)
READ_ONLY = ToolAnnotations(readOnlyHint=True)
IDEMPOTENT = ToolAnnotations(readOnlyHint=False, idempotentHint=True)

started_hangs = 0
cancelled_calls = 0
counts_changed = anyio.Event()


def counted() -> None:
    """Wakes the tools that wait for a count."""
    global counts_changed
    counts_changed.set()
    counts_changed = anyio.Event()


async def wait_for(count, at_least: int) -> str:
    with anyio.move_on_after(10):
        while count() < at_least:
            await counts_changed.wait()
    return str(count())


def count_file() -> str:
    return os.environ["SEED_MCP_COUNT_FILE"]


def started(tool: str) -> None:
    with open(count_file() + ".started", "a") as file:
        file.write(f"{tool}\n")


def lines() -> int:
    try:
        with open(count_file()) as file:
            return sum(1 for _ in file)
    except FileNotFoundError:
        return 0


@server.tool(annotations=NOT_SAFE)
async def count(delay_ms: int = 0) -> str:
    """Wait delay_ms milliseconds, then add one to the counter file."""
    started("count")
    await anyio.sleep(delay_ms / 1000)
    with open(count_file(), "a") as file:
        file.write("counted\n")
    return f"counted {lines()}"


@server.tool(annotations=READ_ONLY)
async def read_count(delay_ms: int = 0) -> str:
    """Wait delay_ms milliseconds, then answer the counter file's count."""
    started("read_count")
    await anyio.sleep(delay_ms / 1000)
    return str(lines())


@server.tool(annotations=NOT_SAFE)
def count_keyed(key: str) -> str:
    """Add the key as a line to the counter file."""
    started("count_keyed")
    with open(count_file(), "a") as file:
        file.write(f"{key}\n")
    return f"counted {key}"


@server.tool(annotations=READ_ONLY)
def find_count(call_id: str, arguments: dict) -> str:
    """Whether a count_keyed call took effect: its key is in the counter file."""
    key = arguments.get("key")
    try:
        with open(count_file()) as file:
            keys = [line.strip() for line in file]
    except FileNotFoundError:
        keys = []
    if key in keys:
        return f"counted {key}"
    raise ToolError(f"no count for {key} (call {call_id})")


@server.tool(annotations=READ_ONLY)
def fail(message: str) -> str:
    """Fail with the message (an isError result)."""
    raise ToolError(message)


@server.tool(annotations=IDEMPOTENT)
async def hang() -> str:
    """Never answer."""
    global started_hangs, cancelled_calls
    started_hangs += 1
    counted()
    try:
        await anyio.sleep_forever()
    finally:
        # Reached when the client cancels the call (notifications/cancelled).
        cancelled_calls += 1
        counted()
    return "unreachable"


@server.tool(annotations=READ_ONLY)
async def hangs(at_least: int = 0) -> str:
    """The hang calls started so far, once there are at least `at_least` (waits up to 10 s)."""
    return await wait_for(lambda: started_hangs, at_least)


@server.tool(annotations=READ_ONLY)
async def cancellations(at_least: int = 0) -> str:
    """The hang calls cancelled so far, once there are at least `at_least` (waits up to 10 s)."""
    return await wait_for(lambda: cancelled_calls, at_least)


@server.tool(annotations=NOT_SAFE)
def exit_now() -> str:
    """Exit the server in the middle of the call."""
    sys.stdout.flush()
    os._exit(3)


@server.tool(annotations=READ_ONLY)
def garbage() -> str:
    """Write a line that is not JSON-RPC to stdout, then answer."""
    os.write(1, b"this is not JSON\n")
    return "after garbage"


@server.tool(annotations=NOT_SAFE)
async def add_tool(ctx: Context) -> str:
    """Add the tool `added` and tell the client its tools changed."""

    def added() -> str:
        """A tool added at run time."""
        return "added"

    server.add_tool(added, name="added", annotations=READ_ONLY)
    await ctx.session.send_tool_list_changed()
    return "added a tool"


def serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"listening on {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    anyio.run(uvicorn.Server(config).serve, [sock])


if __name__ == "__main__":
    if "SEED_MCP_COUNT_FILE" in os.environ:
        with open(count_file() + ".pids", "a") as file:
            file.write(f"{os.getpid()}\n")
    if sys.argv[1:] == ["--http"]:
        serve_http()
    else:
        server.run()
