# First, so that no parse from any presk module meets xDSL 0.74's exponential
# string-literal regex or its unguarded huge integers (see lexer_patch).
from presk.ir import lexer_patch as lexer_patch
