"""What this package adds to presk, found through the `xdsl.universe` entry point."""

from xdsl.passes import ModulePass
from xdsl.universe import Universe


def get_mul_one() -> type[ModulePass]:
    from presk_plugin_example.mul_one import MulOnePass

    return MulOnePass


PLUGIN_UNIVERSE = Universe(all_passes={"psk-mul-one": get_mul_one})
