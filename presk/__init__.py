"""presk: an MLIR-style tensor compiler on xDSL."""
