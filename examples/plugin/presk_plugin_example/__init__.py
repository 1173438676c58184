"""An example presk plugin: one pass, registered through the `xdsl.universe` entry point."""
