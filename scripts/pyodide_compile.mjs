#!/usr/bin/env node
// Compile Python sources to .pyc *with Pyodide's own interpreter*, for the static site.
//
// Usage: node scripts/pyodide_compile.mjs DIR [DIR ...]
//
// Each DIR (a host folder) is mounted into Pyodide (running under Node) and every *.py
// under it gets a sourceless-importable foo.pyc beside it (compileall's "legacy" layout),
// written by Pyodide's CPython, so the magic number is the one the browser's Pyodide
// expects: the build machine's Python can be any version. The .pyc files are
// "unchecked-hash" (PEP 552): the importer never compares them with a source's mtime,
// which unpacking a wheel does not preserve. A file that does not compile (Python 2
// leftovers in a package's test data, say) is left as source; the list of such files is
// printed. Exit code 0 when the run finished, 1 on any other error.
import path from "node:path";
import { loadPyodide } from "pyodide";

const dirs = process.argv.slice(2).map((d) => path.resolve(d));
if (!dirs.length) {
  process.stderr.write("usage: node scripts/pyodide_compile.mjs DIR [DIR ...]\n");
  process.exit(1);
}
const pyodide = await loadPyodide();
const mounts = dirs.map((dir, i) => {
  const mount = `/compile/${i}`;
  pyodide.FS.mkdirTree(mount);
  pyodide.FS.mount(pyodide.FS.filesystems.NODEFS, { root: dir }, mount);
  return mount;
});
pyodide.globals.set("_mounts", pyodide.toPy(mounts));
const report = pyodide.runPython(`
import json, os, py_compile, sys
failed, compiled = [], 0
for mount in _mounts:
    for root, dirs, files in os.walk(mount):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            source = os.path.join(root, name)
            try:
                # dfile: tracebacks name the file as it will sit in site-packages, not /compile/i
                py_compile.compile(source, cfile=source + "c", dfile=os.path.relpath(source, mount),
                                   doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
                compiled += 1
            except py_compile.PyCompileError:
                failed.append(os.path.relpath(source, mount))
json.dumps({"python": sys.version.split()[0], "cache_tag": sys.implementation.cache_tag,
            "compiled": compiled, "failed": failed})
`);
process.stdout.write(report + "\n");
