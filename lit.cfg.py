"""lit configuration: `lit tests/filecheck` runs every `.mlir` test's RUN lines.

The tools (`presk-opt`, `presk`, `filecheck`) are taken from the Python
environment running lit, so a test never picks up another installation
that happens to be on PATH.
"""

# ruff: noqa: F821  (`config` and `lit_config` are provided by lit)

import os
import sys

import lit.formats

config.name = "presk"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
repo_root = os.path.dirname(os.path.abspath(__file__))
# lit resolves `lit tests/filecheck` relative to this file's folder, so the
# source root stays the repository; the tests are the .mlir files under
# tests/filecheck, and every other top-level folder is excluded.
config.test_source_root = repo_root
config.test_exec_root = os.path.join(repo_root, "build", "lit")
config.excludes = ["Inputs"] + [
    entry
    for entry in os.listdir(repo_root)
    if entry != "tests" and os.path.isdir(os.path.join(repo_root, entry))
]

tool_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([tool_dir, os.environ.get("PATH", "")])
for name in ("PRESK_DEBUG", "PRESK_TARGET", "PRESK_CACHE_DIR", "HOME", "TMPDIR"):
    if name in os.environ:
        config.environment[name] = os.environ[name]

for tool in ("presk-opt", "presk", "filecheck"):
    config.substitutions.append((rf"(?<![\w/.-]){tool}(?![\w.-])", os.path.join(tool_dir, tool)))
