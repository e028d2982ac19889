"""`python -m lab serve`: the hub at / and the lab at /lab, served locally and offline.

    python -m lab.ui.serve [--port 5006] [--address 127.0.0.1] [--show | --no-show] [--missions DIR] [--workers 4]

Panel serves Bokeh's and its own JavaScript and CSS from this server (resources mode
"server"); the pages load nothing from a CDN, so they work without a network. The
mission folder is re-checked on each page load: a file added or edited while the
server runs shows up on the next load (a broken one is listed on the hub, not fatal).
"""

import argparse
import errno
import os
import signal
import sys

from .runs.offload import DEFAULT_WORKERS, MAX_WORKERS

__all__ = ["main", "build_parser", "make_apps"]


def _port(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number: use 1 to 65535, or 0 for a free one")
    return value


def _workers(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"{value}: use 1 to {MAX_WORKERS}")
    return value


def build_parser(prog="python -m lab serve"):
    parser = argparse.ArgumentParser(prog=prog, description="Serve the lab locally: the hub at / and a mission at /lab?mission=ID.")
    parser.add_argument("--port", type=_port, default=5006, help="port to listen on (default 5006; 0 picks a free one)")
    parser.add_argument("--address", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--show", dest="show", action="store_true", default=True, help="open a browser tab (default)")
    parser.add_argument("--no-show", dest="show", action="store_false", help="do not open a browser")
    parser.add_argument("--missions", metavar="DIR", default=None, help="folder of mission JSON files (default: the repo's missions/)")
    parser.add_argument("--workers", type=_workers, default=DEFAULT_WORKERS,
                        help=f"runs computed at once, in processes beside the server's (default {DEFAULT_WORKERS}); "
                             "each page has at most one, and a page waits only for its own")
    return parser


# Panel's page template with the viewport meta its own lacks: without it a phone lays the
# page out 980 px wide and shows it at about 40% (the static site's pages have their own).
VIEWPORT_META = '<meta name="viewport" content="width=device-width, initial-scale=1">'


def _page_template():
    from panel.io.resources import _env

    return _env.from_string('{% extends "base.html" %}{% block preamble %}' + VIEWPORT_META
                            + '{{ super() }}{% endblock %}')


def make_apps(missions_dir=None):
    """{route: page function} for pn.serve."""
    import panel as pn
    from tornado.ioloop import IOLoop

    from . import app
    from .timeline import collector
    from . import hub as hub_module
    from .author import author_page

    template = _page_template()

    def page(view):
        if pn.state.curdoc is not None:
            pn.state.curdoc.template = template
        # A closed page's objects were frozen with the rest (collector.py): collect them soon.
        pn.state.on_session_destroyed(lambda _context: collector.thaw_soon(IOLoop.current().call_later))
        return view

    def hub():
        return page(hub_module.hub_page(missions_dir))

    def lab():
        return page(app.lab_page(missions_dir))

    def author():
        return page(author_page.author_page(missions_dir))

    return {"/": hub, "/lab": lab, "/author": author}


def main(argv=None):
    args = build_parser().parse_args(argv)
    missions = args.missions
    if missions is not None:
        if not os.path.isdir(missions):
            print(f"--missions: {missions!r} is not a folder", file=sys.stderr)
            return 2
        missions = os.path.abspath(missions)
        os.environ["SPLIT_THE_FLEET_MISSIONS"] = missions
    os.environ.setdefault("BOKEH_RESOURCES", "server")  # JS/CSS from this server, never a CDN
    import panel as pn

    from tornado.ioloop import PeriodicCallback

    from .runs import offload
    from .timeline import collector
    from .pages import get_catalog
    from .browser.page_bridge import guard_location
    from .browser.url_limits import server_options

    guard_location()  # Panel must not convert the query string before the lab's parser sees it

    catalog = get_catalog(missions)  # the pages share it; it reloads when the folder changes
    print(f"{len(catalog.missions)} missions from {catalog.directory}"
          + (f" ({len(catalog.broken)} broken: see the warning above)" if catalog.broken else ""), file=sys.stderr)
    pn.extension(notifications=False)
    try:
        # The listening socket is bound here, before start(): a busy port fails now.
        server = pn.serve(
            make_apps(missions),
            port=args.port,
            address=args.address,
            show=args.show,
            title={"/": "Split the Fleet", "/lab": "Split the Fleet · lab", "/author": "Write a mission · Split the Fleet"},
            websocket_origin=[f"{host}:{args.port}" for host in ("localhost", "127.0.0.1", args.address)] if args.port else "*",
            threaded=False,
            start=False,
            print_url=False,
            **server_options(),  # addresses as long as the lab reads reach the page (url_limits.py)
        )
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            print(f"error: --port: port {args.port} is in use on {args.address} (stop the other server, or choose "
                  "another port with --port; --port 0 picks a free one)", file=sys.stderr)
        else:
            print(f"error: --port: cannot listen on {args.address}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    collector.serve_pages()  # (many pages' objects: full collections walk only what is new; collector.py)
    PeriodicCallback(collector.thaw, collector.THAW_EVERY_S * 1000).start()  # (the cycles open pages leave)
    offload.start_pool(args.workers)  # runs go to worker processes: one page's run never holds another's
    port = server.port
    print(f"Split the Fleet: http://{'localhost' if args.address in ('127.0.0.1', 'localhost') else args.address}:{port}/", flush=True)
    # SIGTERM (a service manager, `kill`) ends the server as Ctrl+C does: the worker processes stop
    # too. Through the loop's own handler, which wakes it at once (a plain signal handler runs
    # only once the loop next wakes for something else: seconds later).
    try:
        server.io_loop.asyncio_loop.add_signal_handler(signal.SIGTERM, server.io_loop.stop)
    except (AttributeError, NotImplementedError):  # (Windows: no loop signal handlers)
        signal.signal(signal.SIGTERM, lambda *_: server.io_loop.add_callback_from_signal(server.io_loop.stop))
    try:
        server.start()
        server.io_loop.start()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        offload.stop_pool()
    return 0


if __name__ == "__main__":
    sys.exit(main())
