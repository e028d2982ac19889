// Shared by the Node harnesses: boot *bare* Pyodide (npm `pyodide`, no packages,
// no network), run one Python program as __main__, exit with its status.
//
// Exit codes: 0 on success; sys.exit(n)'s n; 1 if the program raised (traceback on
// stderr, harness frames dropped); 2 on harness errors; 3 if any Pyodide package
// got loaded (bare means bare). Harness messages go to stderr as
// "pyodide-harness: ...", so stdout is exactly what the program printed.

import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, "..", "..");
const PYODIDE_DIR = path.join(REPO, "node_modules", "pyodide");

export function die(msg, code = 2) {
  process.stderr.write(`pyodide-harness: ${msg}\n`);
  process.exit(code);
}

export function requireFile(what, file) {
  if (!fs.existsSync(file) || !fs.statSync(file).isFile()) die(`no such ${what}: ${file}`);
}

// `wheels`: local Pyodide package files to load first (run_core.mjs --wheel: numpy, for the
// metrics' numpy path); every other load is refused, and only these may be loaded.
export async function bootBarePyodide(refusal, wheels = []) {
  if (!fs.existsSync(path.join(PYODIDE_DIR, "pyodide.mjs"))) {
    die(`npm pyodide not installed at ${PYODIDE_DIR}: run 'npm ci' (or scripts/setup.sh)`);
  }
  const { loadPyodide, version: jsVersion } = await import(pathToFileURL(path.join(PYODIDE_DIR, "pyodide.mjs")).href);
  // Pyodide hands us a view into wasm memory: copy it before queueing the write.
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
  const say = (msg) => process.stderr.write(`pyodide-harness: [load] ${msg}\n`);  // stdout is the program's
  for (const wheel of wheels) await pyodide.loadPackage(wheel, { messageCallback: say, errorCallback: say });
  pyodide._stfAllowed = wheels.map((w) => path.basename(w).split("-")[0].toLowerCase());
  // Any package load would hit the CDN anyway; refuse it with the reason.
  const refuse = (what) => () => {
    throw new Error(`pyodide-harness: ${what} refused: ${refusal}`);
  };
  pyodide.loadPackage = refuse("loadPackage");
  pyodide.loadPackagesFromImports = refuse("loadPackagesFromImports");
  return { pyodide, jsVersion };
}

// Run programPath as __main__ with cwd `cwd` (and it first on sys.path when
// `onPath`); then report, drain stdout/stderr and exit.
export function runProgramAndExit(pyodide, programPath, programArgs, { cwd, onPath = false }) {
  const program = `/tmp/harness/${path.basename(programPath)}`;  // its own name reads well in tracebacks
  pyodide.FS.mkdirTree("/tmp/harness");
  pyodide.FS.mkdirTree(cwd);
  pyodide.FS.writeFile(program, fs.readFileSync(programPath));
  const runner = `
import os, runpy, sys, traceback
${onPath ? `sys.path.insert(0, ${JSON.stringify(cwd)})` : ""}
os.chdir(${JSON.stringify(cwd)})
sys.dont_write_bytecode = True
sys.argv = [${JSON.stringify(program)}] + ${JSON.stringify(programArgs)}
print("pyodide-harness: python " + sys.version.split()[0] + " (" + sys.platform + ")", file=sys.stderr, flush=True)

def _harness_run():
    try:
        runpy.run_path(${JSON.stringify(program)}, run_name="__main__")
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
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != ${JSON.stringify(program)}:
            tb = tb.tb_next
        traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
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
    // A failure of the harness itself (the program's own errors are caught above).
    process.stderr.write(`pyodide-harness: ${err && err.stack ? err.stack : err}\n`);
    exitCode = 2;
  }
  const loaded = Object.keys(pyodide.loadedPackages || {}).filter((name) => !(pyodide._stfAllowed || []).includes(name));
  if (loaded.length) {
    process.stderr.write(`pyodide-harness: packages were loaded (${loaded.join(", ")}): not bare\n`);
    exitCode = exitCode || 3;
  }
  // Let queued writes drain (pipes are async in Node), then exit.
  process.exitCode = exitCode;
  let pending = 2;
  const done = () => {
    if (--pending === 0) process.exit(exitCode);
  };
  process.stdout.write("", done);
  process.stderr.write("", done);
}
