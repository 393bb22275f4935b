#!/usr/bin/env python3
"""check_doc_commands.py: the command blocks of README.md and docs/*.md run as pasted (make check-docs).

A command block is a fenced block whose info string starts with `sh`. Its first line may say
what kind it is, after the language:

    ```sh                       quick: run here, must exit 0
    ```sh slow: REASON          listed and skipped (trains for minutes, builds, needs a GPU, ...)
    ```sh template: REASON      not meant to run as is (placeholders to fill in); listed

Each file's quick blocks run in order, each in a fresh `bash -e -o pipefail`, in one fresh
temporary directory per file that links the repository's top-level entries (build/, data/,
python/, tools/, ...) but not runs/ or .venv: so `build/fplab ...` works as from the repository
root and whatever a block writes into the working tree stays in the temporary directory.

The docs assume an ordinary user in the repository root on a 2-core machine. As root, Open MPI
refuses mpirun unless OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 are set, as
README.md and docs/distributed.md say; this check sets them when it runs as root.

An unlabelled block whose first line looks like a command is an error: label it `sh` (or mark
it a template). Exit status 1 when a quick block fails or a block is unlabelled.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEEP_OUT = {"runs", ".venv", ".git", "demo-ablation"}
COMMAND_START = re.compile(r"^(build/|make\b|mpirun\b|fplab\b|python3?\b|\./|cc\b|pip\b|tools/|for\b|FPLAB_\w+=|"
                           r"export\b|d=\$\(|\.venv/)")
TIMEOUT = int(os.environ.get("CHECK_DOCS_TIMEOUT", "300"))


def blocks(path):
    """(line, info, text) of every fenced block."""
    out, cur = [], None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.startswith("```"):
                if cur is None:
                    cur = (n, line[3:].strip(), [])
                else:
                    out.append((cur[0], cur[1], "".join(cur[2])))
                    cur = None
            elif cur is not None:
                cur[2].append(line)
    return out


def kind(info):
    """('run'|'slow'|'template'|None, reason) from an info string."""
    words = info.split(None, 1)
    if not words or words[0] not in ("sh", "bash"):
        return None, ""
    rest = words[1] if len(words) > 1 else ""
    m = re.match(r"(slow|template)\s*:?\s*(.*)", rest)
    if m:
        return m.group(1), m.group(2).strip() or "(no reason given)"
    return "run", ""


def workdir():
    d = tempfile.mkdtemp(prefix="fplab-docs.")
    for e in os.listdir(ROOT):
        if e not in KEEP_OUT:
            os.symlink(os.path.join(ROOT, e), os.path.join(d, e))
    return d


def main():
    files = [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
    env = dict(os.environ)
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    ran = failed = skipped = 0
    errors = []
    for path in files:
        rel = os.path.relpath(path, ROOT)
        wd = None
        for line, info, text in blocks(path):
            k, reason = kind(info)
            first = next((l.strip() for l in text.splitlines() if l.strip() and not l.startswith("#")), "")
            if k is None:
                if not info and COMMAND_START.match(first):
                    errors.append(f"{rel}:{line}: an unlabelled block of commands: label it ```sh, "
                                  f"```sh slow: REASON or ```sh template: REASON")
                continue
            if k != "run":
                skipped += 1
                print(f"skip {rel}:{line} ({k}): {reason}")
                continue
            wd = wd or workdir()
            t0 = time.time()
            try:
                p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], cwd=wd, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT)
                rc, out = p.returncode, p.stdout.decode(errors="replace")
            except subprocess.TimeoutExpired as e:
                rc, out = "timeout", (e.stdout or b"").decode(errors="replace")
            ran += 1
            if rc == 0:
                print(f"ok   {rel}:{line} ({time.time() - t0:.1f} s)")
            else:
                failed += 1
                tail = "\n".join("     | " + l for l in out.splitlines()[-12:])
                print(f"FAIL {rel}:{line}: exit {rc} after {time.time() - t0:.1f} s\n{tail}")
        if wd:
            subprocess.run(["rm", "-rf", wd])
    for e in errors:
        print("FAIL " + e)
    print(f"check-docs: {ran} blocks run, {failed} failed, {skipped} skipped (slow or templates), "
          f"{len(errors)} unlabelled")
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
