"""What `presk train` needs besides the compiled step: token streams, checkpoints, the plot of its losses."""
