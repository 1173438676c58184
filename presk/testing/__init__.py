"""What a project testing its own presk passes needs (`presk.testing.lit` for lit)."""
