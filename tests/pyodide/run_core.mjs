#!/usr/bin/env node
// Run a Python program inside *bare* Pyodide with this repo's standard-library-only
// core copied in: the proof that `lab.core` needs nothing but the standard library.
//
// Usage: node tests/pyodide/run_core.mjs [--wheel FILE]... <python-file> [args...]
// (--wheel: a local Pyodide package to load first, e.g. numpy from .cache/pyodide-*: the
// metrics' numpy path; nothing else may load.)
//
// Copies ONLY lab/__init__.py, lab/core/**/*.py and, if present, missions/*.json
// to /repo in Pyodide's file system; /repo is the cwd and first
// on sys.path. Exit codes and output: see bare.mjs.

import fs from "node:fs";
import path from "node:path";
import { REPO, bootBarePyodide, die, requireFile, runProgramAndExit } from "./bare.mjs";

const MOUNT = "/repo";
const argv = process.argv.slice(2);
const wheels = [];
while (argv[0] === "--wheel" && argv.length > 1) {
  argv.shift();
  const wheel = path.resolve(argv.shift());
  requireFile("wheel", wheel);
  wheels.push(wheel);
}
const [programArg, ...programArgs] = argv;
if (!programArg) die("usage: node tests/pyodide/run_core.mjs [--wheel FILE]... <python-file> [args...]");
const programPath = path.resolve(programArg);
requireFile("Python file", programPath);

function walkPy(dir) {
  // lab/core/**/*.py, skipping caches; sorted for a stable copy order.
  const out = [];
  for (const ent of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const full = path.join(dir, ent.name);
    if (ent.isDirectory()) {
      if (ent.name !== "__pycache__" && !ent.name.startsWith(".")) out.push(...walkPy(full));
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

const { pyodide, jsVersion } = await bootBarePyodide("lab.core must need only the standard library", wheels);
for (const file of repoFiles) {
  const rel = path.relative(REPO, file).split(path.sep).join("/");
  const dest = `${MOUNT}/${rel}`;
  pyodide.FS.mkdirTree(dest.slice(0, dest.lastIndexOf("/")));
  pyodide.FS.writeFile(dest, fs.readFileSync(file));
}
process.stderr.write(`pyodide-harness: pyodide ${pyodide.version} (npm ${jsVersion}), ${repoFiles.length} repo files in ${MOUNT}\n`);
runProgramAndExit(pyodide, programPath, programArgs, { cwd: MOUNT, onPath: true });
