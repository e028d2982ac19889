"""How long an address `lab serve` lets through to the page.

The lab reads the first MAX_QUERY_CHARS (200,000) characters and MAX_QUERY_FIELDS
parameters of a query string and says what it ignored (state.parse_search, query_note).
Tornado's defaults answer such an address before the page can: 64 KB of request headers
(the request line is one of them) end in a reset connection, and over 1,000 query
arguments (Tornado 6.5.8+, a process-wide setting) in a blank 400. Bokeh also carries
the query's arguments, compressed, in the session token the page's websocket sends as a
header: about 1.7 times the query for random letters. So `lab serve` takes headers up to
MAX_HEADER_BYTES and one argument per character of the longest query the lab reads.
A longer address still meets those limits (see docs/architecture.md, "The lab page's code").
"""

from ..url_state import MAX_QUERY_CHARS

__all__ = ["MAX_HEADER_BYTES", "MAX_ARGUMENTS", "server_options"]

MAX_HEADER_BYTES = 1 << 20  # a 200,000-character query's request line and its ~350 KB websocket token, with room
MAX_ARGUMENTS = MAX_QUERY_CHARS + 1  # "&&&…": Python counts one field per separator, empty or not


def server_options():
    """Keyword arguments for pn.serve, after raising Tornado's query-argument limit (idempotent)."""
    try:
        from tornado import httputil

        config = httputil.ParseBodyConfig(urlencoded=httputil.ParseUrlEncodedConfig(max_arguments=MAX_ARGUMENTS))
        httputil.set_parse_body_config(config)
    except AttributeError:  # Tornado before 6.5.8 has no such limit to raise
        pass
    return {"http_server_kwargs": {"max_header_size": MAX_HEADER_BYTES}}
