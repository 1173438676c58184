"""lit configuration: `lit tests/filecheck` runs every `.mlir` test's RUN lines.

The same configuration a plugin's tests get (`presk.testing.lit.configure`:
the tools `presk-opt`, `presk` and `filecheck` taken from the Python
environment running lit, presk's variables passed through), with the
repository as the source root.
"""

# ruff: noqa: F821  (`config` and `lit_config` are provided by lit)

import os

from presk.testing.lit import configure

repo_root = os.path.dirname(os.path.abspath(__file__))
# lit resolves `lit tests/filecheck` relative to this file's folder, so the
# source root stays the repository; the tests are the .mlir files under
# tests/, and every other top-level folder is excluded.
configure(
    config,
    name="presk",
    excludes=["Inputs", *(e for e in os.listdir(repo_root) if e != "tests" and os.path.isdir(os.path.join(repo_root, e)))],
    exec_root=os.path.join(repo_root, "build", "lit"),
)
config.test_source_root = repo_root
