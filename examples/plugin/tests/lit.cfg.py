# The plugin's lit suite: `lit -sv tests` from the plugin's folder runs every .mlir test here.
# ruff: noqa: F821  (lit provides `config`)
from presk.testing.lit import configure

configure(config, name="presk-plugin-example")
