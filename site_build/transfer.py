"""Files the site also serves gzip-compressed, which the lab's worker unpacks itself.

A static host need not compress what it serves (`python -m http.server` does not, nor
do many classroom set-ups), and Pyodide's runtime is mostly WebAssembly, which shrinks
to a third under gzip: pyodide.asm.wasm is 8.6 MB, 2.8 MB as .gz. So, for a self-hosted
Pyodide, the build writes `<file>.gz` beside each of GZIPPED and lists them in lab.js's
config; the worker fetches the .gz and unpacks it with the browser's own
DecompressionStream (native code, ~5 ms a MB), falling back to the plain file when the
.gz is missing or the browser lacks DecompressionStream. The standard library goes as a
*stored* zip inside the .gz: the whole-stream gzip is smaller than a zip deflated file by
file, and Python then reads its modules without inflating them in WebAssembly.

The wheels the worker installs from this site (Panel, Bokeh, the lab, ...) go the same
way (`gzip_site_wheels`): stored, and gzipped whole, 12% smaller than deflated file by
file, and unpacked in Pyodide without inflating each file in WebAssembly.

The lab page's own scripts (BokehJS, Panel's JS: 2.9 MB, 0.75 MB as .gz) go the same way
(`write_gzipped_files`): site_build/pages.py takes them out of lab.html's <head> and
assets/loader.js fetches the .gz copies, unpacks them and runs them in order, while the
worker already starts Pyodide.
"""

import gzip
import io
import zipfile

from site_build.urls import _inside

__all__ = ["GZIPPED", "write_gzipped", "write_gzipped_files", "gzip_site_wheels"]

# Pyodide's own files, by name in its folder: fetched by the worker (pyodide.asm.js too:
# it is fetched, unpacked and run from a blob URL before Pyodide would load it itself).
GZIPPED = ("pyodide.asm.wasm", "pyodide.asm.js", "python_stdlib.zip")


def _write_gz(path, data):
    """`path`.gz holding `data` (no timestamp in the header: the same bytes on every build)."""
    path.with_name(path.name + ".gz").write_bytes(gzip.compress(data, compresslevel=9, mtime=0))


def _stored(zip_bytes):
    """The same zip with every member stored (no compression), entries and times kept."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(zip_bytes)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)
            info.compress_type = zipfile.ZIP_STORED
            dst.writestr(info, data)
    return out.getvalue()


def write_gzipped(site, *, pyodide_base, pyodide_self_hosted):
    """Write the .gz copies; returns the names listed in the worker's config (empty: none)."""
    if not pyodide_self_hosted:
        return []  # another host's Pyodide: nothing of ours to put beside it
    folder = site / _inside(pyodide_base)
    done = []
    for name in GZIPPED:
        path = folder / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if name.endswith(".zip"):
            data = _stored(data)
            path.write_bytes(data)  # the fallback, and what the .gz holds
        _write_gz(path, data)
        done.append(name)
    return done


def write_gzipped_files(site, rel_paths):
    """`<file>.gz` beside each of `rel_paths` (relative to the site); the plain files stay, as the fallback."""
    for rel in rel_paths:
        _write_gz(site / rel, (site / rel).read_bytes())


def gzip_site_wheels(site, wheel_urls):
    """Each wheel of `wheel_urls` ([{name, url}]) that is on this site: stored, with a .gz beside it,
    and marked {"gz": true} for the worker. Wheels from another host are left alone."""
    for wheel in wheel_urls:
        rel = _inside(wheel["url"])
        if rel is None or not (site / rel).is_file():
            continue
        path = site / rel
        data = _stored(path.read_bytes())
        path.write_bytes(data)
        _write_gz(path, data)
        wheel["gz"] = True
    return wheel_urls
