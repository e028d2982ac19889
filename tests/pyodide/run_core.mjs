#!/usr/bin/env node
// Run a Python program inside *bare* Pyodide (npm `pyodide`, no packages) with
// this repo's standard-library-only core copied in. This is the proof that
// `lab.core` needs nothing but the standard library: no numpy, no micropip,
// no package downloads are possible here.
//
// Usage: node tests/pyodide/run_core.mjs <python-file> [args...]
//
// - Copies ONLY lab/__init__.py, lab/core/**/*.py and, if present,
//   missions/*.json and missions/traces/*.csv into the Pyodide file system at
//   /repo; puts /repo on sys.path; chdir /repo.
// - Runs <python-file> as __main__ (sys.argv = [<python-file>, args...]).
// - The program's stdout goes to Node's stdout and its stderr to Node's stderr.
// - Exit code: 0 on success; the code of sys.exit(n); 1 if the program
//   raised (traceback on stderr); 2 on harness errors (missing file, no Pyodide).
// - Reports the Pyodide and Python versions on stderr (one line each,
//   "pyodide-harness: ..."), so stdout stays exactly what the program printed.

import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, "..", "..");
const PYODIDE_DIR = path.join(REPO, "node_modules", "pyodide");
const MOUNT = "/repo";

function die(msg, code = 2) {
  process.stderr.write(`pyodide-harness: ${msg}\n`);
  process.exit(code);
}

// ---- arguments ---------------------------------------------------------------
const [programArg, ...programArgs] = process.argv.slice(2);
if (!programArg) die("usage: node tests/pyodide/run_core.mjs <python-file> [args...]");
const programPath = path.resolve(programArg);
if (!fs.existsSync(programPath) || !fs.statSync(programPath).isFile()) {
  die(`no such Python file: ${programArg}`);
}
if (!fs.existsSync(path.join(PYODIDE_DIR, "pyodide.mjs"))) {
  die(`npm pyodide not installed at ${PYODIDE_DIR}: run 'npm ci' (or scripts/setup.sh)`);
}

// ---- which repo files go in -------------------------------------------------
function walkPy(dir) {
  // lab/core/**/*.py, skipping caches; sorted for a stable copy order.
  const out = [];
  for (const ent of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const full = path.join(dir, ent.name);
    if (ent.isDirectory()) {
      if (ent.name === "__pycache__" || ent.name.startsWith(".")) continue;
      out.push(...walkPy(full));
    } else if (ent.isFile() && ent.name.endsWith(".py")) {
      out.push(full);
    }
  }
  return out;
}

function filesIn(dir, ext) {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(ext))
    .map((e) => path.join(dir, e.name))
    .sort();
}

const repoFiles = [];
const labInit = path.join(REPO, "lab", "__init__.py");
if (fs.existsSync(labInit)) repoFiles.push(labInit);
const coreDir = path.join(REPO, "lab", "core");
if (fs.existsSync(coreDir)) repoFiles.push(...walkPy(coreDir));
repoFiles.push(...filesIn(path.join(REPO, "missions"), ".json"));
repoFiles.push(...filesIn(path.join(REPO, "missions", "traces"), ".csv"));

// ---- Pyodide ----------------------------------------------------------------
const { loadPyodide, version: jsVersion } = await import(
  pathToFileURL(path.join(PYODIDE_DIR, "pyodide.mjs")).href
);

// Program output goes straight through, byte for byte. Pyodide hands us a view
// into wasm memory, so copy it before queueing the write.
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
  // Anything Pyodide prints while booting goes to stderr, never stdout.
  stdout: (msg) => process.stderr.write(`pyodide-harness: [boot] ${msg}\n`),
  stderr: (msg) => process.stderr.write(`pyodide-harness: [boot] ${msg}\n`),
});
pyodide.setStdout(writer(process.stdout));
pyodide.setStderr(writer(process.stderr));

// Bare means bare: refuse any package load (it would hit the CDN anyway).
const refuse = (what) => () => {
  throw new Error(`pyodide-harness: ${what} refused: lab.core must need only the standard library`);
};
pyodide.loadPackage = refuse("loadPackage");
pyodide.loadPackagesFromImports = refuse("loadPackagesFromImports");

// ---- copy the repo in -------------------------------------------------------
const FS = pyodide.FS;
for (const file of repoFiles) {
  const rel = path.relative(REPO, file).split(path.sep).join("/");
  const dest = `${MOUNT}/${rel}`;
  FS.mkdirTree(dest.slice(0, dest.lastIndexOf("/")));
  FS.writeFile(dest, fs.readFileSync(file));
}
// The program keeps its own file name so tracebacks read naturally.
const PROGRAM_IN_FS = `/tmp/harness/${path.basename(programPath)}`;
FS.mkdirTree("/tmp/harness");
FS.writeFile(PROGRAM_IN_FS, fs.readFileSync(programPath));

// ---- run --------------------------------------------------------------------
const runner = `
import os, runpy, sys, traceback
sys.path.insert(0, ${JSON.stringify(MOUNT)})
os.chdir(${JSON.stringify(MOUNT)})
sys.dont_write_bytecode = True
sys.argv = [${JSON.stringify(PROGRAM_IN_FS)}] + ${JSON.stringify(programArgs)}
print("pyodide-harness: python " + sys.version.split()[0] + " (" + sys.platform + ")", file=sys.stderr, flush=True)

def _harness_run():
    try:
        runpy.run_path(${JSON.stringify(PROGRAM_IN_FS)}, run_name="__main__")
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
        # Drop the harness's own frames (this function, runpy) from the traceback.
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != ${JSON.stringify(PROGRAM_IN_FS)}:
            tb = tb.tb_next
        traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()

_harness_run()
`;

process.stderr.write(`pyodide-harness: pyodide ${pyodide.version} (npm ${jsVersion}), ${repoFiles.length} repo files in ${MOUNT}\n`);

let exitCode;
try {
  exitCode = pyodide.runPython(runner, { filename: "<pyodide-harness>" });
} catch (err) {
  // A failure of the harness itself (the program's own errors are caught above).
  process.stderr.write(`pyodide-harness: ${err && err.stack ? err.stack : err}\n`);
  exitCode = 2;
}

const loaded = Object.keys(pyodide.loadedPackages || {});
if (loaded.length) {
  process.stderr.write(`pyodide-harness: packages were loaded (${loaded.join(", ")}): not bare\n`);
  exitCode = exitCode || 3;
}

// Let queued stdout/stderr writes drain (pipes are async in Node), then exit.
process.exitCode = exitCode;
const finish = () => process.exit(exitCode);
let pending = 2;
const done = () => {
  if (--pending === 0) finish();
};
process.stdout.write("", done);
process.stderr.write("", done);
