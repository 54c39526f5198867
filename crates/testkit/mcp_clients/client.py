"""One MCP session through the official Python SDK (`mcp` on PyPI), for Switchyard's tests.

Connects to a streamable HTTP endpoint, lists every tool (following cursors), optionally
calls one tool with `_meta`, and prints one JSON object on stdout:

    {"protocol_version": "...", "instructions": "..." | null,
     "tools": [{"name", "description", "annotations", "inputSchema"}, ...],
     "call": {"isError": bool, "content": [...], "structuredContent": ...} | null}

The bearer token is read from the environment variable named by --token-env, never from
the command line. Any failure ends the process with a non-zero status and the error on
stderr. Run by crates/testkit/src/mcp_clients.rs with the interpreter of the virtual
environment scripts/test.sh installs (SWITCHYARD_TEST_PYTHON_MCP).
"""

import argparse
import asyncio
import json
import os
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="the streamable HTTP endpoint")
    parser.add_argument(
        "--mode",
        default="auto",
        help="'legacy' (initialize handshake), 'auto' (server/discover, then initialize), "
        "or a modern protocol version such as 2026-07-28",
    )
    parser.add_argument("--token-env", help="environment variable holding the bearer token")
    parser.add_argument("--call", metavar="TOOL", help="a tool to call after listing")
    parser.add_argument("--arguments", default="{}", help="the call's arguments, a JSON object")
    parser.add_argument("--meta", default="{}", help="the call's _meta, a JSON object")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for each request")
    return parser.parse_args()


def dump(model) -> object:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def note_refusal(response: httpx2.Response) -> None:
    """Says on stderr which HTTP status a request got: the SDK reports only that it failed."""
    if response.status_code >= 400:
        request = response.request
        status = response.status_code
        print(f"client.py: HTTP {status} from {request.method} {request.url}", file=sys.stderr)


async def session(args: argparse.Namespace) -> dict:
    headers = {}
    if args.token_env:
        token = os.environ.get(args.token_env)
        if token is None:
            raise SystemExit(f"client.py: {args.token_env} is not set")
        headers["Authorization"] = f"Bearer {token}"
    # The SDK's advice: headers go on an httpx2 client of one's own (its default timeouts).
    http = httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(30.0, read=300.0),
        event_hooks={"response": [note_refusal]},
    )
    transport = streamable_http_client(args.url, http_client=http)
    async with http, Client(
        transport, mode=args.mode, read_timeout_seconds=args.timeout, cache=None
    ) as client:
        tools = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(dump(tool) for tool in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        call = None
        if args.call:
            result = await client.call_tool(
                args.call,
                json.loads(args.arguments),
                meta=json.loads(args.meta) or None,
            )
            call = {
                "isError": result.is_error,
                "content": [dump(block) for block in result.content],
                "structuredContent": result.structured_content,
            }
        return {
            "protocol_version": client.protocol_version,
            "instructions": client.instructions,
            "tools": tools,
            "call": call,
        }


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, which anyio's task groups raise."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def main() -> None:
    args = parse_args()
    try:
        answer = asyncio.run(session(args))
    except Exception as error:  # boundary: one readable line per cause, for the test's message
        for leaf in leaves(error):
            detail = {k: v for k, v in vars(leaf).items() if not k.startswith("_")}
            print(f"client.py: {type(leaf).__name__}: {leaf} {detail or ''}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
