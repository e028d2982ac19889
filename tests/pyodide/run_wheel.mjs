#!/usr/bin/env node
// Install a wheel into *bare* Pyodide (npm `pyodide`, no packages, no micropip, no
// network) the way the static site's worker does, then run a Python program.
//
// Usage: node tests/pyodide/run_wheel.mjs <wheel.whl> <python-file> [args...]
//
// - The wheel is unpacked with pyodide.unpackArchive(bytes, "wheel") into
//   site-packages. Nothing else of the repo is copied in, so the program sees only
//   what the wheel carries (cwd is an empty /tmp/run).
// - The program runs as __main__; its stdout/stderr go to Node's stdout/stderr.
// - Exit code: 0 on success; sys.exit(n)'s n; 1 if the program raised; 2 on harness
//   errors (missing file, no Pyodide); 3 if any Pyodide package got loaded.
// - "pyodide-harness: ..." lines on stderr report the versions and where the wheel went.

import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, "..", "..");
const PYODIDE_DIR = path.join(REPO, "node_modules", "pyodide");

function die(msg, code = 2) {
  process.stderr.write(`pyodide-harness: ${msg}\n`);
  process.exit(code);
}

const [wheelArg, programArg, ...programArgs] = process.argv.slice(2);
if (!wheelArg || !programArg) die("usage: node tests/pyodide/run_wheel.mjs <wheel.whl> <python-file> [args...]");
const wheelPath = path.resolve(wheelArg);
const programPath = path.resolve(programArg);
for (const [what, p] of [["wheel", wheelPath], ["Python file", programPath]]) {
  if (!fs.existsSync(p) || !fs.statSync(p).isFile()) die(`no such ${what}: ${p}`);
}
if (!fs.existsSync(path.join(PYODIDE_DIR, "pyodide.mjs"))) {
  die(`npm pyodide not installed at ${PYODIDE_DIR}: run 'npm ci' (or scripts/setup.sh)`);
}

const { loadPyodide, version: jsVersion } = await import(pathToFileURL(path.join(PYODIDE_DIR, "pyodide.mjs")).href);
const writer = (stream) => ({
  write(buf) {
    stream.write(Buffer.from(buf));
    return buf.length;
  },
});
const pyodide = await loadPyodide({
  indexURL: PYODIDE_DIR + path.sep,
  packages: [],
  fullStdLib: false,
  env: { HOME: "/home/pyodide", PYTHONHASHSEED: "0" },
  stdout: (msg) => process.stderr.write(`pyodide-harness: [boot] ${msg}\n`),
  stderr: (msg) => process.stderr.write(`pyodide-harness: [boot] ${msg}\n`),
});
pyodide.setStdout(writer(process.stdout));
pyodide.setStderr(writer(process.stderr));
const refuse = (what) => () => {
  throw new Error(`pyodide-harness: ${what} refused: the wheel must need only the standard library here`);
};
pyodide.loadPackage = refuse("loadPackage");
pyodide.loadPackagesFromImports = refuse("loadPackagesFromImports");

// Same call as the site's worker (static/site/lab-worker.js).
const sitePackages = pyodide.runPython("import site; site.getsitepackages()[0]");
pyodide.unpackArchive(new Uint8Array(fs.readFileSync(wheelPath)), "wheel", { extractDir: sitePackages });
process.stderr.write(`pyodide-harness: pyodide ${pyodide.version} (npm ${jsVersion}); ${path.basename(wheelPath)} -> ${sitePackages}\n`);

const PROGRAM = `/tmp/harness/${path.basename(programPath)}`;
pyodide.FS.mkdirTree("/tmp/harness");
pyodide.FS.mkdirTree("/tmp/run");
pyodide.FS.writeFile(PROGRAM, fs.readFileSync(programPath));

const runner = `
import os, runpy, sys, traceback
os.chdir("/tmp/run")
sys.dont_write_bytecode = True
sys.argv = [${JSON.stringify(PROGRAM)}] + ${JSON.stringify(programArgs)}

def _harness_run():
    try:
        runpy.run_path(${JSON.stringify(PROGRAM)}, run_name="__main__")
        return 0
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except BaseException as exc:
        traceback.print_exception(type(exc), exc, exc.__traceback__)
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()

_harness_run()
`;

let exitCode;
try {
  exitCode = pyodide.runPython(runner, { filename: "<pyodide-harness>" });
} catch (err) {
  process.stderr.write(`pyodide-harness: ${err && err.stack ? err.stack : err}\n`);
  exitCode = 2;
}
const loaded = Object.keys(pyodide.loadedPackages || {});
if (loaded.length) {
  process.stderr.write(`pyodide-harness: packages were loaded (${loaded.join(", ")}): not bare\n`);
  exitCode = exitCode || 3;
}
process.exitCode = exitCode;
let pending = 2;
const done = () => {
  if (--pending === 0) process.exit(exitCode);
};
process.stdout.write("", done);
process.stderr.write("", done);
